"""A TensorFlow 1 graph program, no Estimator: between-graph replication with parameter
servers, `replica_device_setter` and `MonitoredTrainingSession`, as distributed TensorFlow was
written before TF2 (now through `tf.compat.v1`). Worker 0 is the chief: it initializes (or
restores) the variables and checkpoints; every worker trains asynchronously against the PS.

    tfhelm up --workers 2 --ps 1 --script tf1_graph.py -- --train-dir /log/NAME/train
"""

import argparse
import json
import os

import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

parser = argparse.ArgumentParser()
parser.add_argument("--train-dir", default="/tmp/tf1-graph")
parser.add_argument("--steps", type=int, default=100)
args = parser.parse_args()

config = json.loads(os.environ["TF_CONFIG"])
cluster = tf.train.ClusterSpec({k: v for k, v in config["cluster"].items() if k != "evaluator"})
job, index = config["task"]["type"], config["task"]["index"]
server = tf.train.Server(cluster, job_name=job, task_index=index)
if job == "ps":
    server.join()  # the chart runs its own PS servers; kept as such programs have it

is_chief = job == "worker" and index == 0
with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{index}", cluster=cluster)):
    global_step = tf.train.get_or_create_global_step()
    x = tf.random.normal([32, 8], seed=index)
    y = tf.reduce_sum(x[:, :4], axis=1, keepdims=True)
    w = tf.get_variable("w", [8, 1], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
tf.summary.scalar("loss", loss)

hooks = [tf.train.StopAtStepHook(last_step=args.steps)]
session_config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"])
with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, checkpoint_dir=args.train_dir,
                                       hooks=hooks, save_checkpoint_steps=50, config=session_config) as sess:
    while not sess.should_stop():
        _, step, value = sess.run([train_op, global_step, loss])
        if step % 20 == 0:
            print(f"worker:{index} global step {step}: loss {value:.4f}", flush=True)
print(f"worker:{index} done", flush=True)
