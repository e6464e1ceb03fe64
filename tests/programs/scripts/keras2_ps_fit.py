"""Keras 2 `Model.fit` under ParameterServerStrategy, with a sidecar evaluator.

In the style of TensorFlow's "Parameter server training" guide: the chief (coordinator)
builds the model in the strategy's scope and calls `model.fit`; the workers and PS run
servers; an evaluator task runs `SidecarEvaluator` on the checkpoints the chief writes.
Keras 2 (tf-keras): run it with TF_USE_LEGACY_KERAS=1 (`tfhelm up --keras 2`).

    tfhelm up --chief --in-graph --workers 2 --ps 1 --evaluator --keras 2 \
      --script keras2_ps_fit.py -- --model-dir /log/NAME/model
"""

import argparse
import json
import os

import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", default=os.environ.get("TFHELM_LOG_DIR", "/tmp/keras2-ps"))
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--steps-per-epoch", type=int, default=10)
args = parser.parse_args()

assert tf.keras.__name__.startswith("tf_keras"), f"Keras 2 expected, got {tf.keras.__name__}"
task = json.loads(os.environ["TF_CONFIG"])["task"]
checkpoint_dir = os.path.join(args.model_dir, "checkpoints")


def make_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    return model


def dataset(seed):
    x = tf.random.stateless_normal((256, 8), seed=(seed, 0))
    y = tf.reduce_sum(x[:, :4], axis=1, keepdims=True)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).batch(32).repeat()


if task["type"] in ("worker", "ps"):  # what the guide's servers do (the chart runs its own)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    tf.distribute.Server(resolver.cluster_spec(), job_name=task["type"], task_index=task["index"],
                         protocol="grpc", start=True).join()
elif task["type"] == "evaluator":
    evaluator = tf.keras.utils.SidecarEvaluator(make_model(), dataset(7), checkpoint_dir, steps=4,
                                                max_evaluations=args.epochs)
    evaluator.start()
    print(f"evaluator done: evaluated the checkpoint of epoch {args.epochs}", flush=True)
else:  # the chief
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = make_model()
    history = model.fit(dataset(1), epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, callbacks=[
        tf.keras.callbacks.ModelCheckpoint(os.path.join(checkpoint_dir, "ckpt-{epoch}"), save_weights_only=True),
        tf.keras.callbacks.BackupAndRestore(os.path.join(args.model_dir, "backup")),
    ])
    print(f"chief done: loss {history.history['loss'][-1]:.4f} after {args.epochs} epochs", flush=True)
