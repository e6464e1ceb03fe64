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

import os
import sys
import time

from tfhelm_example import (Env, parse_args, should_crash, crash, log, Metrics,
                            ensure_dataset, make_dataset, loss_fn, FEATURES, HIDDEN)


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


if __name__ == "__main__":
    sys.exit(main())
