"""Between-graph training with parameter servers: every worker runs this script.

Shape: one or more PS, one or more workers, no chief (worker 0 is the chief):

    tfhelm run --local --ps 1 --workers 2 examples/ps_between_graph.py -- --steps 60

PS tasks run `launcher.py server`. Each worker builds its own copy of the graph, with the
variables placed on the PS tasks (`replica_device_setter`) and its input pipeline and
compute on itself, and trains asynchronously: every worker reads the variables, computes
gradients on its own shard of the data and applies them on the PS.

Why TensorFlow 1 style (`tf.compat.v1`, graph mode, MonitoredSession)? Because it is the
only between-graph parameter-server training that works in TF 2.21. TF2's
ParameterServerStrategy is in-graph only: one coordinator owns the variables and
dispatches functions to workers (see ps_in_graph.py). One coordinator per worker over the
same PS tasks does not share anything: each coordinator creates its own variables. Eager
clients cannot share variables on a PS either. The compat.v1 graph runtime ships in
TF 2.21 and runs this unchanged.

Worker 0 (or the chief, if there is one) initialises or restores the variables, saves
checkpoints (tf.compat.v1.train.Saver, the graph-mode checkpointer:
tf.train.CheckpointManager is eager-only) and writes TensorBoard summaries to
$TFHELM_LOG_DIR/train. The others wait until the model is ready. On restart the chief
restores the latest checkpoint, so the global step carries on from where it was.
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
    args = parse_args("between-graph parameter-server training (tf.compat.v1)", argv)
    env = Env()
    if env.task_type not in ("chief", "worker"):
        log(env, f"a {env.task_type} task does not run this script: PS tasks run "
                 "`launcher.py server`, and this example has no evaluator")
        return 2
    ensure_dataset(env.data_dir)  # before graph mode: plain eager file writing
    return train(env, args)


def train(env: Env, args) -> int:
    import tensorflow as tf

    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    log(env, f"between-graph worker {env!r}")
    metrics = Metrics(env)

    cluster = {r: h for r, h in env.cluster.items() if r != "evaluator"}
    if cluster:
        cluster_spec = tf.train.ClusterSpec(cluster)
        # This worker's own server: its graph's non-variable ops run here.
        server = tf.distribute.Server(cluster_spec, job_name=env.task_type,
                                      task_index=env.task_index, protocol="grpc", start=True)
        master = server.target
        device = f"/job:{env.task_type}/task:{env.task_index}"
        # See only the PS and ourselves: never wait for the other workers.
        config = tf1.ConfigProto(device_filters=["/job:ps", device])
    else:  # standalone: one process, no PS
        cluster_spec, master, device, config = None, "", None, None
    trainers = env.count("chief") + env.count("worker") or 1
    shard = env.task_index + (env.count("chief") if env.task_type == "worker" else 0)

    with tf1.device(tf1.train.replica_device_setter(
            worker_device=device, cluster=cluster_spec) if cluster_spec else None):
        global_step = tf1.train.get_or_create_global_step()
        dataset = make_dataset(env.data_dir, args.batch_size // trainers or 1,
                               num_shards=trainers, shard=shard)
        x, y = tf1.data.make_one_shot_iterator(dataset).get_next()
        init = tf1.initializers.random_normal(stddev=0.3, seed=1)
        variables = {
            "w1": tf1.get_variable("w1", [FEATURES, HIDDEN], initializer=init),
            "b1": tf1.get_variable("b1", [HIDDEN], initializer=tf1.zeros_initializer()),
            "w2": tf1.get_variable("w2", [HIDDEN, 1], initializer=init),
            "b2": tf1.get_variable("b2", [1], initializer=tf1.zeros_initializer()),
        }
        loss, accuracy = loss_fn(tf, variables, x, y)
        train_op = tf1.train.GradientDescentOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step)
    tf1.summary.scalar("loss", loss)
    tf1.summary.scalar("accuracy", accuracy)

    scaffold = tf1.train.Scaffold(saver=tf1.train.Saver(max_to_keep=3))
    hooks = [tf1.train.StopAtStepHook(last_step=args.steps),
             MetricsHook(metrics, global_step, loss, accuracy, every=args.checkpoint_every)]
    if env.is_chief:
        hooks += [
            tf1.train.CheckpointSaverHook(
                env.checkpoint_dir, save_steps=args.checkpoint_every, scaffold=scaffold,
                listeners=[CrashListener(env, args, hooks[1])]),
            tf1.train.SummarySaverHook(save_steps=max(1, args.checkpoint_every // 4),
                                       output_dir=os.path.join(env.log_dir, "train"),
                                       scaffold=scaffold),
        ]
        creator = tf1.train.ChiefSessionCreator(scaffold=scaffold, master=master,
                                                config=config,
                                                checkpoint_dir=env.checkpoint_dir)
    else:
        wait_until_ready(env, tf1, master, config)
        creator = tf1.train.WorkerSessionCreator(scaffold=scaffold, master=master,
                                                 config=config)

    t0 = time.time()
    local_steps = 0
    with tf1.train.MonitoredSession(session_creator=creator, hooks=hooks) as session:
        while not session.should_stop():
            session.run(train_op)
            local_steps += 1
    metrics.write("done", step=hooks[1].last_step, local_steps=local_steps,
                  seconds=time.time() - t0)
    log(env, f"done at global step {hooks[1].last_step} after {local_steps} local "
             f"steps in {time.time() - t0:.1f}s")
    return 0


def wait_until_ready(env, tf1, master, config, poll: float = 0.5) -> None:
    """Wait for the chief to initialise or restore the model.

    WorkerSessionCreator waits too, but checks only every 30 seconds; this polls.
    """
    report = tf1.report_uninitialized_variables()
    while True:
        with tf1.Session(master, config=config) as session:
            if not len(session.run(report)):
                return
        log(env, "waiting for the chief to initialise the model")
        time.sleep(poll)


class MetricsHook:  # a tf.compat.v1.train.SessionRunHook (duck-typed: no base import here)
    """Records the global step, loss and accuracy of this worker every `every` steps."""

    def __init__(self, metrics, global_step, loss, accuracy, every):
        self.metrics, self.every = metrics, every
        self.fetches = {"step": global_step, "loss": loss, "accuracy": accuracy}
        self.global_step = global_step
        self.last_step = self.start_step = None
        self._local = 0

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        self.last_step = self.start_step = int(session.run(self.global_step))
        log(self.metrics.env, f"session ready at global step {self.last_step}")
        self.metrics.write("start", step=self.last_step)

    def before_run(self, run_context):
        import tensorflow as tf

        return tf.compat.v1.train.SessionRunArgs(self.fetches)

    def after_run(self, run_context, run_values):
        r = run_values.results
        self.last_step = int(r["step"])  # async: read before or after this run's increment
        self._local += 1
        if self._local % self.every == 0 or self._local == 1:
            self.metrics.write("step", step=self.last_step, loss=float(r["loss"]),
                               accuracy=float(r["accuracy"]))
            log(self.metrics.env, f"global step {self.last_step}: loss {r['loss']:.4f} "
                                  f"accuracy {r['accuracy']:.3f}")

    def end(self, session):
        self.last_step = int(session.run(self.global_step))


class CrashListener:  # a tf.compat.v1.train.CheckpointSaverListener (duck-typed)
    """Records each checkpoint; implements --crash-after-checkpoint."""

    def __init__(self, env, args, metrics_hook):
        self.env, self.args, self.metrics_hook = env, args, metrics_hook

    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        step = int(global_step_value)
        self.metrics_hook.metrics.write("checkpoint", step=step)
        if should_crash(self.args, self.metrics_hook.start_step or 0, step):
            crash(self.env, step)

    def end(self, session, global_step_value):
        pass


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
