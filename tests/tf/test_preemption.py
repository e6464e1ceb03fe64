"""Save on notice with real TensorFlow: a Keras `model.fit` with the callback the chart ships
(`tfhelm_preemption.SaveOnPreemption`), run by the chart's launcher as in a pod, is given
SIGTERM mid-training (a drain, a spot reclaim, a preemption): it saves at the step it reached
and exits 143; run again, it resumes at that step and trains to the end. An in-graph chief
does the same when the preemption stopped its worker servers first."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.tf.helpers import EXAMPLES, TASK_ENV, Collect, events, latest_checkpoint_step, metrics, topology
from tfhelm.cluster import localrun, spec
from tfhelm.cluster.localrun import LAUNCHER

pytestmark = pytest.mark.needs_tf

STEPS_PER_EPOCH, EPOCHS = 20, 3
SCRIPT = f"""
import os, sys, time
import numpy as np
import tensorflow as tf
import tfhelm_preemption as preemption  # the launcher ships it beside itself

model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"),
                             tf.keras.layers.Dense(1)])
model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
model.optimizer.build(model.trainable_variables)
checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
manager = tf.train.CheckpointManager(checkpoint, os.environ["TFHELM_CHECKPOINT_DIR"], max_to_keep=2)
if manager.latest_checkpoint:
    checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
step = int(model.optimizer.iterations.numpy())
print(f"restored at step {{step}}", flush=True)


class Progress(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        print(f"step {{int(self.model.optimizer.iterations.numpy())}}", flush=True)
        time.sleep(0.05)


x, y = np.random.rand(640, 4).astype("float32"), np.random.rand(640, 1).astype("float32")
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat()
# The epoch and the batch to go on from, from the optimizer's step the checkpoint holds.
model.fit(data, epochs={EPOCHS}, initial_epoch=step // {STEPS_PER_EPOCH}, steps_per_epoch={STEPS_PER_EPOCH},
          verbose=0, callbacks=[Progress(), preemption.SaveOnPreemption(manager)])
manager.save(checkpoint_number=int(model.optimizer.iterations.numpy()))
print(f"done at step {{int(model.optimizer.iterations.numpy())}}", flush=True)
"""


def launch(tmp_path) -> subprocess.Popen:
    (tmp_path / "cluster-spec.json").write_text(spec.dumps(spec.compact_spec(
        "demo", "team-a", spec.Shape(1, 0), generation="0a1b2c")))
    env = {**{k: v for k, v in TASK_ENV.items() if k != "TF_CONFIG"},
           "TFHELM_CLUSTER_SPEC_FILE": str(tmp_path / "cluster-spec.json"), "TFHELM_TASK_TYPE": "worker",
           "TFHELM_TASK_INDEX": "0", "TFHELM_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
           "PYTHONUNBUFFERED": "1"}
    (tmp_path / "train.py").write_text(SCRIPT)
    return subprocess.Popen([sys.executable, str(LAUNCHER), "script", str(tmp_path / "train.py")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_keras_fit_saves_on_sigterm_and_its_restart_resumes_there(tmp_path):
    first = launch(tmp_path)
    for line in first.stdout:  # until it trains (TensorFlow took its time to start)
        if line.startswith("step 25"):
            break
    first.send_signal(signal.SIGTERM)  # to the launcher, which passes it on
    _, err = first.communicate(timeout=120)
    assert first.returncode == 128 + signal.SIGTERM, err
    saved = int(re.search(r"tfhelm_preemption: saved at step (\d+)", err).group(1))
    assert 25 <= saved < STEPS_PER_EPOCH * EPOCHS, err
    assert f"ckpt-{saved}.index" in os.listdir(tmp_path / "checkpoints")

    second = launch(tmp_path)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert f"restored at step {saved}\n" in out, out
    # Keras goes on by whole epochs: the rest of the saved one is trained again, not skipped.
    rest = (EPOCHS - saved // STEPS_PER_EPOCH) * STEPS_PER_EPOCH
    assert f"done at step {saved + rest}" in out, out


@pytest.mark.parametrize("first", [["worker-0", "worker-1"], []], ids=["worker servers stopped first", "chief alone"])
def test_an_in_graph_chief_saves_on_sigterm_and_its_restart_resumes_there(tmp_path, first):
    """Kueue's preemption stops the in-graph worker servers at once (their pods go with no delay)
    and the chief beside them: the steps the chief scheduled then wait for servers that will not
    come back (TensorFlow waits up to an hour), yet it must save where it got to (the PS serve on
    after SIGTERM) and exit 143, not block until the grace period ends in SIGKILL. A drain stops
    the chief alone, its steps still running on live workers. Either way the restarted chief
    resumes at exactly the step it saved."""
    values = {"worker": {"replicas": 2}, "ps": {"replicas": 1}, "chief": {"enabled": True}, "mode": "in-graph",
              "code": {"args": ["--steps", "100000", "--checkpoint-every", "50"]}}
    tasks, args = topology(values)
    dirs, sink = localrun.RunDirs(tmp_path), Collect()
    cluster = localrun.LoopbackCluster(tasks, str(EXAMPLES / "ps_in_graph.py"), args, dirs, sink=sink,
                                       base_env=TASK_ENV)
    cluster.start()
    try:
        chief = cluster.procs["chief-0"]
        until(lambda: (latest_checkpoint_step(dirs.checkpoints) or 0) >= 50, chief, "the first checkpoint")
        for name in first:
            cluster.signal_task(name, signal.SIGTERM)
        if first:
            until(lambda: "failed with UnavailableError" in sink.text("chief-0"), chief,
                  "the chief to see a worker server go")
        cluster.signal_task("chief-0", signal.SIGTERM)
        code = chief.wait(300)  # a guard against the hang, not a speed bound
        assert code == 128 + signal.SIGTERM, sink.text("chief-0")
        saved = events(metrics(dirs.log, "chief-0"), "preempted")
        assert len(saved) == 1 and saved[0]["step"] >= 50, saved
        if not first:  # the servers run on: the Job's next chief resumes against them
            restarted = cluster.start_task(next(t for t in tasks if t.name == "chief-0"))
            until(lambda: len(events(metrics(dirs.log, "chief-0"), "start")) == 2, restarted, "the restart")
            assert events(metrics(dirs.log, "chief-0"), "start")[1]["step"] == saved[0]["step"]
    finally:
        cluster.close()


def until(condition, chief: subprocess.Popen, what: str, timeout: float = 300) -> None:
    """Wait for `condition` while the chief runs (if it ended, its log says why)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert chief.poll() is None, f"the chief exited {chief.returncode} while waiting for {what}"
        assert time.monotonic() < deadline, f"waited {timeout:g}s for {what}"
        time.sleep(0.2)
