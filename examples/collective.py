"""Synchronous data-parallel training with MultiWorkerMirroredStrategy (no PS).

Shape: workers only (optionally a chief, which then trains as one of them):

    tfhelm run --local --workers 2 examples/collective.py -- --steps 60

Every worker runs this script and holds a full copy of the variables. Each step, every
worker computes gradients on its own shard of the data and the updates are averaged across
all workers with collective all-reduce over gRPC, so the copies stay identical. All workers
must be up for any to make progress; if one dies the others stop in the next collective and
the whole group restarts from the latest checkpoint.

Checkpoints: every worker saves (saving may itself need collectives), the chief (or worker
0) into $TFHELM_CHECKPOINT_DIR and the others into a temporary directory they delete right
away; every worker restores the chief's latest checkpoint on start. TensorBoard summaries
go to $TFHELM_LOG_DIR/train, written by the chief only.

A custom training loop rather than Keras: Keras 3's `model.fit` does not work under
MultiWorkerMirroredStrategy (keras-team/keras#20585).
"""

from __future__ import annotations

import os
import shutil
import sys
import time

from tfhelm_example import (Env, training_resolver, parse_args, should_crash, crash, log,
                            Metrics, ensure_dataset, make_dataset, model_variables, scalar,
                            sgd_step)


def main(argv=None) -> int:
    args = parse_args("MultiWorkerMirroredStrategy training", argv)
    env = Env()
    if env.task_type not in ("chief", "worker"):
        log(env, f"a {env.task_type} task does not run this script: it needs "
                 "workers only (and at most a chief)")
        return 2
    if env.count("ps"):
        log(env, "MultiWorkerMirroredStrategy uses no PS; drop --ps")
        return 2
    ensure_dataset(env.data_dir)
    return train(env, args)


def train(env: Env, args) -> int:
    import tensorflow as tf

    log(env, f"collective worker {env!r}")
    metrics = Metrics(env)
    resolver = training_resolver(tf, env) if env.cluster else None
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    replicas = strategy.num_replicas_in_sync

    with strategy.scope():
        # MEAN: an update made in each replica is averaged across all of them (all-reduce).
        variables = model_variables(tf, aggregation=tf.VariableAggregation.MEAN)
        step = tf.Variable(0, dtype=tf.int64, name="global_step")
    checkpoint = tf.train.Checkpoint(step=step, **variables)
    latest = tf.train.latest_checkpoint(env.checkpoint_dir)
    if latest:
        checkpoint.restore(latest).assert_existing_objects_matched()
    start = int(step.numpy())
    log(env, f"restored {latest} at step {start}" if latest
        else "no checkpoint: starting at step 0")
    metrics.write("start", step=start, restored=latest, replicas=replicas)

    save_dir = env.checkpoint_dir if env.is_chief else os.path.join(
        env.checkpoint_dir, f".tmp-{env.task}")
    manager = tf.train.CheckpointManager(checkpoint, save_dir, max_to_keep=3)

    def dataset_fn(ctx: tf.distribute.InputContext):
        return make_dataset(env.data_dir, ctx.get_per_replica_batch_size(args.batch_size),
                            num_shards=ctx.num_input_pipelines,
                            shard=ctx.input_pipeline_id)

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    lr = args.learning_rate

    @tf.function
    def train_step(it):
        def replica_fn(x, y):
            return sgd_step(tf, variables, x, y, lr)

        loss, accuracy = strategy.run(replica_fn, args=next(it))
        step.assign_add(1)
        mean = tf.distribute.ReduceOp.MEAN
        return strategy.reduce(mean, loss, axis=None), strategy.reduce(mean, accuracy, axis=None)

    writer = (tf.summary.create_file_writer(os.path.join(env.log_dir, "train"))
              if env.is_chief else tf.summary.create_noop_writer())
    t0 = time.time()
    done = start
    while done < args.steps:
        loss, accuracy = train_step(iterator)
        done = int(step.numpy())
        if done % args.checkpoint_every and done < args.steps:
            continue
        loss, accuracy = float(loss), float(accuracy)
        with writer.as_default():
            scalar(tf, "loss", loss, done)
            scalar(tf, "accuracy", accuracy, done)
        writer.flush()
        path = manager.save(checkpoint_number=done)
        if not env.is_chief:
            shutil.rmtree(save_dir, ignore_errors=True)
            path = None
        metrics.write("step", step=done, loss=loss, accuracy=accuracy, checkpoint=path)
        log(env, f"step {done}: loss {loss:.4f} accuracy {accuracy:.3f}"
                 + (f"; saved {path}" if path else ""))
        if should_crash(args, start, done):
            if not env.is_chief:  # die only once the chief's checkpoint is there
                wait_for_checkpoint(tf, env.checkpoint_dir, done)
            crash(env, done)
    metrics.write("done", step=done, seconds=time.time() - t0)
    log(env, f"trained steps {start}..{done} in {time.time() - t0:.1f}s")
    return 0


def wait_for_checkpoint(tf, directory: str, step: int, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        latest = tf.train.latest_checkpoint(directory)
        if latest and int(latest.rsplit("-", 1)[1]) >= step:
            return
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
