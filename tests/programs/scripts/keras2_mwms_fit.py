"""Keras 2 `Model.fit` under MultiWorkerMirroredStrategy: BackupAndRestore, TensorBoard logs
(the callback needs the `tensorboard` package), and the model saved by the chief while the other workers write theirs to a `workertemp` directory.

In the style of TensorFlow's "Multi-worker training with Keras" tutorial. It asks for Keras 2
itself, as programs in the wild do (no chart setting needed; the image needs tf-keras).

    tfhelm up --workers 2 --ps 0 --script keras2_mwms_fit.py -- --model-dir /log/NAME/model
"""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported: Keras 2 (tf-keras)

import argparse  # noqa: E402
import json  # noqa: E402

import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", default="/tmp/keras2-mwms")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--steps-per-epoch", type=int, default=10)
args = parser.parse_args()

strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ["TF_CONFIG"])["task"]
task_type, task_id = task["type"], task["index"]


def is_chief():
    return task_type == "chief" or (task_type == "worker" and task_id == 0)


def write_filepath(filepath):
    """The chief writes to `filepath`; every other worker to a directory of its own."""
    dirpath, base = os.path.dirname(filepath), os.path.basename(filepath)
    if not is_chief():
        dirpath = os.path.join(dirpath, f"workertemp_{task_id}")
        tf.io.gfile.makedirs(dirpath)
    return os.path.join(dirpath, base)


def dataset(global_batch_size):
    x = tf.random.stateless_normal((512, 8), seed=(1, 0))
    y = tf.cast(tf.reduce_sum(x[:, :4], axis=1) > 0, tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).repeat().batch(global_batch_size)


with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"),
                                 tf.keras.layers.Dense(2)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])

model.fit(dataset(32 * strategy.num_replicas_in_sync), epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
          verbose=2, callbacks=[tf.keras.callbacks.BackupAndRestore(backup_dir=os.path.join(args.model_dir, "backup")),
                                tf.keras.callbacks.TensorBoard(write_filepath(os.path.join(args.model_dir, "tb")))])

path = write_filepath(os.path.join(args.model_dir, "saved_model"))
model.save(path)  # every worker saves (the save runs collectives); only the chief's copy stays
if not is_chief():
    tf.io.gfile.rmtree(os.path.dirname(path))
print(f"{task_type}:{task_id} done; model {'saved to ' + path if is_chief() else 'not kept'}", flush=True)
