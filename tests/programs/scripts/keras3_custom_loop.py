"""A Keras 3 model trained by a custom loop under MultiWorkerMirroredStrategy.

In the style of TensorFlow's "Custom training loop with Keras and MultiWorkerMirroredStrategy"
tutorial, with Keras 3 (TensorFlow's own `tf.keras`): `tfhelm up --keras 3` makes sure no
image setting turns Keras 2 on. The chief checkpoints every epoch and resumes from the latest
checkpoint; at the end it saves the model as `.keras`.

    tfhelm up --workers 2 --ps 0 --keras 3 --script keras3_custom_loop.py -- --model-dir /log/NAME/model
"""

import argparse
import json
import os

import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", default="/tmp/keras3-ctl")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--steps-per-epoch", type=int, default=10)
args = parser.parse_args()

import keras  # noqa: E402

assert keras.__version__.startswith("3."), f"Keras 3 expected, got {keras.__version__}"
strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ["TF_CONFIG"])["task"]
is_chief = task["type"] == "chief" or (task["type"] == "worker" and task["index"] == 0)
global_batch = 32 * strategy.num_replicas_in_sync


def dataset_fn(context):
    x = tf.random.stateless_normal((512, 8), seed=(2, 0))
    y = tf.reduce_sum(x[:, :4], axis=1, keepdims=True)
    batch = context.get_per_replica_batch_size(global_batch)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch)
    return ds.shard(context.num_input_pipelines, context.input_pipeline_id)


with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.05)
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)

checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch)
checkpoint_dir = os.path.join(args.model_dir, "checkpoints" if is_chief else f"workertemp_{task['index']}")
manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=2)
latest = tf.train.latest_checkpoint(os.path.join(args.model_dir, "checkpoints"))
if latest:
    checkpoint.restore(latest)
iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))


@tf.function
def train_step(iterator):
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(tf.square(model(x, training=True) - y),
                                              global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    per_replica = strategy.run(step, args=next(iterator))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


while int(epoch.numpy()) < args.epochs:
    loss = sum(float(train_step(iterator)) for _ in range(args.steps_per_epoch)) / args.steps_per_epoch
    epoch.assign_add(1)
    manager.save()  # every worker (the save is collective); the others into their workertemp
    print(f"epoch {int(epoch.numpy())}: loss {loss:.4f}", flush=True)

if is_chief:
    model.save(os.path.join(args.model_dir, "model.keras"))
else:
    tf.io.gfile.rmtree(checkpoint_dir)
print(f"{task['type']}:{task['index']} done after {args.epochs} epochs", flush=True)
