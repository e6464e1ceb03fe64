"""What the tfhelm examples share: where things go (TF_CONFIG and the TFHELM_* paths),
the synthetic TFRecord data set, the model, metrics lines and TensorBoard scalars.

It sits beside the scripts: the launcher puts the script's directory on sys.path (as
`python script.py` does), and `tfhelm up --script examples/X.py` ships the .py files
beside the script with it. TensorFlow is imported only inside functions that need it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import time


FEATURES = 8
NUM_FILES = 4
RECORDS_PER_FILE = 256
DATASET = "synthetic-v1"  # bump when the generator changes, so old files are not reused


# --- where things go --------------------------------------------------------------------

class Env:
    """This task's place in the cluster and its directories."""

    def __init__(self, environ=None):
        env = os.environ if environ is None else environ
        raw = env.get("TF_CONFIG", "")
        config = json.loads(raw) if raw.strip() else {}
        self.cluster: dict[str, list[str]] = config.get("cluster", {})
        task = config.get("task", {})
        self.task_type: str = task.get("type", "worker")
        self.task_index: int = int(task.get("index", 0))
        script = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "example"
        default_root = os.path.join(os.getcwd(), ".tfhelm", "standalone", script)
        self.data_dir = env.get("TFHELM_DATA_DIR") or os.path.join(default_root, "data")
        self.log_dir = env.get("TFHELM_LOG_DIR") or os.path.join(default_root, "log")
        self.checkpoint_dir = (env.get("TFHELM_CHECKPOINT_DIR")
                               or os.path.join(self.log_dir, "checkpoints"))

    @property
    def task(self) -> str:
        return f"{self.task_type}-{self.task_index}"

    def count(self, role: str) -> int:
        return len(self.cluster.get(role, []))

    @property
    def is_chief(self) -> bool:
        """The one task that writes checkpoints and summaries: the chief, else worker 0."""
        if self.count("chief"):
            return self.task_type == "chief"
        return self.task_type == "worker" and self.task_index == 0

    def __repr__(self) -> str:
        shape = ", ".join(f"{r}={len(h)}" for r, h in self.cluster.items()) or "standalone"
        return f"{self.task} ({shape}) data={self.data_dir} log={self.log_dir}"


def training_resolver(tf, env: Env):
    """A cluster resolver for the training strategies, without the evaluator.

    The evaluator runs no server: a coordinator (ParameterServerStrategy) or a collective
    group (MultiWorkerMirroredStrategy) whose cluster spec lists it waits for it forever.
    Kubeflow's TFJob leaves it out of every TF_CONFIG for the same reason.
    """
    cluster = {r: h for r, h in env.cluster.items() if r != "evaluator"}
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type=env.task_type, task_id=env.task_index,
        rpc_layer="grpc")


def parse_args(description: str, argv=None, steps: int = 60, checkpoint_every: int = 20):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps,
                   help="train until the global step reaches this (resumed runs included)")
    p.add_argument("--batch-size", type=int, default=32, help="global batch size")
    p.add_argument("--learning-rate", type=float, default=0.5)
    p.add_argument("--checkpoint-every", type=int, default=checkpoint_every,
                   help="save a checkpoint every this many global steps")
    p.add_argument("--crash-after-checkpoint", type=int, default=0, metavar="STEP",
                   help="testing aid: exit with status 3 right after the first checkpoint "
                        "at or past STEP is written, as if the pod had been killed (only when "
                        "this run started below STEP, so a restarted task goes on)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.checkpoint_every < 1 or args.batch_size < 1:
        p.error("--steps, --checkpoint-every and --batch-size must be positive")
    return args


CRASH_EXIT = 3


def should_crash(args, start: int, saved: int) -> bool:
    """--crash-after-checkpoint STEP: crash once the checkpoint crossing STEP is saved.

    Only a run that started below STEP crashes, so the restarted task carries on.
    """
    return bool(args.crash_after_checkpoint) and start < args.crash_after_checkpoint <= saved


def crash(env: Env, step: int) -> None:
    """Leave at once, without cleanup, like a killed pod (see --crash-after-checkpoint)."""
    log(env, f"crashing on purpose after the checkpoint at step {step}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(CRASH_EXIT)


def log(env: Env, msg: str) -> None:
    print(msg, flush=True)


# --- metrics: one JSON line per event, one file per task (safe on a shared volume) --------

class Metrics:
    def __init__(self, env: Env):
        self.env = env
        self.path = os.path.join(env.log_dir, "metrics", f"{env.task}.jsonl")
        os.makedirs(os.path.dirname(self.path), exist_ok=True)

    def write(self, event: str, **fields) -> None:
        # pod: which incarnation of the task wrote the line (its pod's uid in a tfhelm task).
        line = json.dumps({"event": event, "task": self.env.task,
                           "pod": os.environ.get("TFHELM_POD_UID") or socket.gethostname(),
                           "time": time.time(), **fields},
                          default=lambda o: o.item() if hasattr(o, "item") else str(o))
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


# --- the synthetic data set ---------------------------------------------------------------

def dataset_dir(data_dir: str) -> str:
    return os.path.join(data_dir, DATASET)


def ensure_dataset(data_dir: str) -> str:
    """Write the TFRecord files once; concurrent tasks race safely (atomic rename).

    A linearly separable-ish binary problem: x ~ N(0, I), y = [x . w + noise > 0], with
    fixed seeds, so every task that writes it writes the same bytes.
    """
    import numpy as np
    import tensorflow as tf

    final = dataset_dir(data_dir)
    if os.path.isdir(final):
        return final
    os.makedirs(data_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{DATASET}.", dir=data_dir)
    rng = np.random.default_rng(20240601)
    w_true = rng.normal(size=FEATURES).astype("float32")
    for i in range(NUM_FILES):
        x = rng.normal(size=(RECORDS_PER_FILE, FEATURES)).astype("float32")
        y = (x @ w_true + 0.3 * rng.normal(size=RECORDS_PER_FILE) > 0).astype("float32")
        path = os.path.join(tmp, f"train-{i:05d}-of-{NUM_FILES:05d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for xi, yi in zip(x, y):
                example = tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=xi.tolist())),
                    "y": tf.train.Feature(float_list=tf.train.FloatList(value=[float(yi)])),
                }))
                writer.write(example.SerializeToString())
    try:
        os.rename(tmp, final)
    except OSError:  # another task got there first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def make_dataset(data_dir: str, batch_size: int, num_shards: int = 1, shard: int = 0,
                 seed: int | None = None):
    """tf.data over the TFRecord files: interleave, parse, shuffle, repeat, batch, prefetch.

    Shards by file when there are enough files for every shard, else by record.
    """
    import tensorflow as tf

    pattern = os.path.join(dataset_dir(data_dir), "train-*.tfrecord")
    files = tf.data.Dataset.list_files(pattern, shuffle=False)
    by_file = num_shards <= NUM_FILES
    if num_shards > 1 and by_file:
        files = files.shard(num_shards, shard)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2,
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    if num_shards > 1 and not by_file:
        ds = ds.shard(num_shards, shard)
    spec = {"x": tf.io.FixedLenFeature([FEATURES], tf.float32),
            "y": tf.io.FixedLenFeature([1], tf.float32)}
    ds = ds.map(lambda r: (lambda e: (e["x"], e["y"]))(tf.io.parse_single_example(r, spec)),
                num_parallel_calls=tf.data.AUTOTUNE)
    return ds.shuffle(512, seed=seed).repeat().batch(batch_size, drop_remainder=True) \
             .prefetch(tf.data.AUTOTUNE)


# --- the model: a tiny MLP in plain TensorFlow (no Keras, see the examples' docstrings) ----

HIDDEN = 16


def model_variables(tf, aggregation=None):
    """Weights of x -> relu(x W1 + b1) W2 + b2, as a dict of tf.Variables (TF2, eager)."""
    kw = {"aggregation": aggregation} if aggregation is not None else {}
    init = tf.random.stateless_normal
    return {
        "w1": tf.Variable(init([FEATURES, HIDDEN], seed=[1, 2]) * 0.3, name="w1", **kw),
        "b1": tf.Variable(tf.zeros([HIDDEN]), name="b1", **kw),
        "w2": tf.Variable(init([HIDDEN, 1], seed=[3, 4]) * 0.3, name="w2", **kw),
        "b2": tf.Variable(tf.zeros([1]), name="b2", **kw),
    }


def forward(tf, v, x):
    return tf.matmul(tf.nn.relu(tf.matmul(x, v["w1"]) + v["b1"]), v["w2"]) + v["b2"]


def loss_fn(tf, v, x, y):
    logits = forward(tf, v, x)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), y), tf.float32))
    return loss, accuracy


def sgd_step(tf, v, x, y, learning_rate):
    """One plain SGD step on the variables (inside a replica function); loss and accuracy."""
    with tf.GradientTape() as tape:
        loss, accuracy = loss_fn(tf, v, x, y)
    grads = tape.gradient(loss, list(v.values()))
    for var, grad in zip(v.values(), grads):
        var.assign_sub(learning_rate * grad)
    return loss, accuracy


# --- TensorBoard scalars without the tensorboard package ----------------------------------

def scalar(tf, name: str, value, step) -> None:
    """Write a TensorBoard scalar to the default summary writer (TF2).

    TensorFlow 2.21 no longer depends on the tensorboard package, and `tf.summary.scalar`
    raises without it; this writes the same record (a float32 tensor tagged for the
    "scalars" plugin) with core TensorFlow only, so stock images need nothing extra.
    """
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    tf.summary.write(name, tf.cast(value, tf.float32), step=step, metadata=metadata)
