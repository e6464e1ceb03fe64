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
writes TensorBoard summaries to $TFHELM_LOG_DIR/train. Stopped with notice (SIGTERM: a drain,
an eviction, a preemption), it saves at the step it reached and leaves (tfhelm_preemption,
which every tfhelm task can import), so its restart loses nothing. An optional evaluator task
evaluates every checkpoint as it appears ("side-car evaluation", $TFHELM_LOG_DIR/eval).

Keras is not used: Keras 3's `model.fit` does not work under ParameterServerStrategy
(keras-team/keras#20585), and plain variables keep each process small and fast to start.
"""

from __future__ import annotations

import os
import sys
import time

from tfhelm_example import (Env, training_resolver, parse_args, should_crash, crash, log,
                            Metrics, ensure_dataset, make_dataset, model_variables, loss_fn,
                            scalar, sgd_step)

try:  # in a tfhelm task (the launcher ships it): SIGTERM ends in a checkpoint
    import tfhelm_preemption as preemption
except ImportError:  # run on its own: SIGTERM stops it as usual
    preemption = None


NOTICE_STEPS = 5  # steps scheduled between two looks at SIGTERM
NOTICE_WAIT = 3.0  # seconds the steps under way get after SIGTERM (the PS serve on 10 s or more)


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
            loss, accuracy = sgd_step(tf, variables, x, y, lr)
            step.assign_add(1)
            return loss, accuracy

        x, y = next(it)
        return strategy.run(replica_fn, args=(x, y))

    writer = tf.summary.create_file_writer(os.path.join(env.log_dir, "train"))
    done = start
    t0 = time.time()
    while done < args.steps:
        # Schedule up to the next checkpoint boundary (each scheduled step adds exactly 1), a
        # few steps at a time, so SIGTERM is seen soon: then save what was reached and leave.
        chunk = min(args.checkpoint_every - done % args.checkpoint_every, args.steps - done)
        results = []
        while len(results) < chunk and not (preemption and preemption.requested()):
            batch = [coordinator.schedule(train_step, args=(iterator,))
                     for _ in range(min(NOTICE_STEPS, chunk - len(results)))]
            if not join_unless_noticed(coordinator):
                break
            results += batch
        done = int(step.numpy())
        if preemption and preemption.requested():
            path = manager.save(checkpoint_number=done)
            # A step still running on a worker may have counted after `done` was read: the step
            # saved is the one a restart resumes from.
            saved = int(tf.train.load_variable(path, "step/.ATTRIBUTES/VARIABLE_VALUE"))
            metrics.write("preempted", step=saved, checkpoint=path)
            log(env, f"stopped at step {saved} (SIGTERM); saved {path}")
            preemption.leave()
        values = [r.fetch() for r in results]
        loss = sum(float(v[0]) for v in values) / len(values)
        accuracy = sum(float(v[1]) for v in values) / len(values)
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


def join_unless_noticed(coordinator) -> bool:
    """`coordinator.join()`, but after SIGTERM only NOTICE_WAIT more (then False). A preemption
    stops the worker servers at once, and the steps they held wait for them to come back
    (TensorFlow waits up to an hour): a plain join() would block until the grace period ends in
    SIGKILL, never saving. The PS serve on a while after their SIGTERM (the chart's stop delay),
    so the chief can still read and save the variables."""
    if preemption is None:
        coordinator.join()
        return True
    noticed = None
    while not coordinator.done():  # raises a failed step's error, as join() does
        if preemption.requested():
            # The steps under way finish in a moment while their workers run: wait that long.
            noticed = noticed or time.monotonic()
            if time.monotonic() - noticed > NOTICE_WAIT:
                return False
        time.sleep(0.05)
    return True


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


if __name__ == "__main__":
    sys.exit(main())
