"""In-graph training: a chief drives worker and PS servers with ParameterServerStrategy.

Shape: one chief, one or more PS, one or more workers (optionally one evaluator):

    tfhelm run --local --chief --ps 1 --workers 2 examples/ps_in_graph.py -- --steps 60
    tfhelm up --chief --ps 2 --workers 8 --script examples/ps_in_graph.py   # on Kubernetes

Only the chief runs this script's training loop. PS and workers run
`launcher.py server`: bare gRPC servers. The chief (the "coordinator") builds the
variables on the PS tasks, sends the dataset function to every worker once, then schedules
train steps; each step runs on whichever worker is free, reading and updating the variables
on the PS asynchronously. This is TF2's supported parameter-server training.

The chief also checkpoints (tf.train.CheckpointManager; on restart it restores the latest
checkpoint and carries on from that step, even against servers that kept running) and
writes TensorBoard summaries to $TFHELM_LOG_DIR/train. An optional evaluator task
evaluates every checkpoint as it appears ("side-car evaluation", $TFHELM_LOG_DIR/eval).

Keras is not used: Keras 3's `model.fit` does not work under ParameterServerStrategy
(keras-team/keras#20585), and plain variables keep each process small and fast to start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time


def main(argv=None) -> int:
    args = parse_args("ParameterServerStrategy training driven by a chief", argv)
    env = Env()
    if not env.cluster:
        print("ps_in_graph.py needs a cluster with a chief and PS tasks; run it with\n"
              "  tfhelm run --local --chief --ps 1 --workers 2 examples/ps_in_graph.py",
              file=sys.stderr)
        return 2
    if env.task_type in ("worker", "ps"):
        return serve(env)  # normally the launcher's job (`launcher.py server`)
    if env.task_type == "evaluator":
        return evaluate(env, args)
    return train(env, args)


def train(env: Env, args) -> int:
    # Let worker and PS failures reach the coordinator rather than retrying forever.
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    import tensorflow as tf

    log(env, f"coordinator for {env!r}")
    if not env.count("ps") or not env.count("worker"):
        log(env, "ParameterServerStrategy needs at least one PS and one worker")
        return 2
    metrics = Metrics(env)
    ensure_dataset(env.data_dir)

    strategy = tf.distribute.ParameterServerStrategy(training_resolver(tf, env))
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    with strategy.scope():  # variables live on the PS tasks, round-robin
        variables = model_variables(tf)
        step = tf.Variable(0, dtype=tf.int64, name="global_step")
    checkpoint = tf.train.Checkpoint(step=step, **variables)
    manager = tf.train.CheckpointManager(checkpoint, env.checkpoint_dir, max_to_keep=3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
    start = int(step.numpy())
    log(env, f"restored {manager.latest_checkpoint} at step {start}"
        if manager.latest_checkpoint else "no checkpoint: starting at step 0")
    metrics.write("start", step=start, restored=manager.latest_checkpoint)
    if start >= args.steps:
        log(env, f"already trained to step {start} (--steps {args.steps})")
        metrics.write("done", step=start)
        return 0

    # Runs on every worker: each reads all files in its own random order.
    def dataset_fn():
        return make_dataset(env.data_dir, args.batch_size)

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    lr = args.learning_rate

    @tf.function
    def train_step(it):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss, accuracy = loss_fn(tf, variables, x, y)
            grads = tape.gradient(loss, list(variables.values()))
            for var, grad in zip(variables.values(), grads):
                var.assign_sub(lr * grad)
            step.assign_add(1)
            return loss, accuracy

        x, y = next(it)
        return strategy.run(replica_fn, args=(x, y))

    writer = tf.summary.create_file_writer(os.path.join(env.log_dir, "train"))
    done = start
    t0 = time.time()
    while done < args.steps:
        # Schedule up to the next checkpoint boundary; each scheduled step adds exactly 1.
        chunk = min(args.checkpoint_every - done % args.checkpoint_every, args.steps - done)
        results = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(chunk)]
        coordinator.join()
        values = [r.fetch() for r in results]
        loss = sum(float(v[0]) for v in values) / len(values)
        accuracy = sum(float(v[1]) for v in values) / len(values)
        done = int(step.numpy())
        with writer.as_default():
            scalar(tf, "loss", loss, done)
            scalar(tf, "accuracy", accuracy, done)
        writer.flush()
        path = manager.save(checkpoint_number=done)
        metrics.write("step", step=done, loss=loss, accuracy=accuracy, checkpoint=path)
        log(env, f"step {done}: loss {loss:.4f} accuracy {accuracy:.3f}; saved {path}")
        if should_crash(args, start, done):
            crash(env, done)
    metrics.write("done", step=done, seconds=time.time() - t0)
    log(env, f"trained steps {start}..{done} in {time.time() - t0:.1f}s")
    return 0


def evaluate(env: Env, args) -> int:
    """Side-car evaluation: evaluate each new checkpoint until the last one."""
    import tensorflow as tf

    metrics = Metrics(env)
    ensure_dataset(env.data_dir)
    variables = model_variables(tf)
    step = tf.Variable(0, dtype=tf.int64, name="global_step")
    checkpoint = tf.train.Checkpoint(step=step, **variables)
    dataset = make_dataset(env.data_dir, 128, seed=7).take(4)
    writer = tf.summary.create_file_writer(os.path.join(env.log_dir, "eval"))
    timeout = float(os.environ.get("TFHELM_EVAL_TIMEOUT", "600"))
    log(env, f"evaluating checkpoints in {env.checkpoint_dir}")
    for path in tf.train.checkpoints_iterator(env.checkpoint_dir, min_interval_secs=1,
                                              timeout=timeout):
        try:
            checkpoint.read(path).expect_partial()
        except (tf.errors.NotFoundError, ValueError) as e:  # pruned under our feet
            log(env, f"skipping {path}: {e}")
            continue
        results = [loss_fn(tf, variables, x, y) for x, y in dataset]
        loss = float(sum(r[0] for r in results) / len(results))
        accuracy = float(sum(r[1] for r in results) / len(results))
        done = int(step.numpy())
        with writer.as_default():
            scalar(tf, "loss", loss, done)
            scalar(tf, "accuracy", accuracy, done)
        writer.flush()
        metrics.write("eval", step=done, loss=loss, accuracy=accuracy, checkpoint=path)
        log(env, f"eval at step {done}: loss {loss:.4f} accuracy {accuracy:.3f}")
        if done >= args.steps:
            return 0
    log(env, f"no new checkpoint for {timeout:.0f}s: giving up")
    return 1


def serve(env: Env) -> int:
    import tensorflow as tf

    server = tf.distribute.Server(training_resolver(tf, env).cluster_spec(),
                                  job_name=env.task_type,
                                  task_index=env.task_index, protocol="grpc", start=True)
    log(env, "serving (this task should normally run `launcher.py server`)")
    server.join()
    return 0


# ==== tfhelm example boilerplate: identical in every example (a test checks) ===========

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
        line = json.dumps({"event": event, "task": self.env.task, "time": time.time(), **fields},
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


# ==== end of the boilerplate ===========================================================


if __name__ == "__main__":
    sys.exit(main())
