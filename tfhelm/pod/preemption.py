"""Save on notice: SIGTERM (a drain, an eviction, a spot reclaim, a Kueue preemption) ends in a
checkpoint, and the task's restart resumes from it.

In a task the launcher (the container's PID 1) passes SIGTERM on to the script's process,
which Python's default action kills at once. Every task can `import tfhelm_preemption` (the
chart ships this module beside the launcher, which puts it at the end of the script's
sys.path): from then on SIGTERM only takes note; the script sees it at its next step
(`requested()`), saves, and leaves with `leave()`, exit status 143 as if SIGTERM had ended
it, so Kubernetes counts the pod as stopped, not as a task that finished. The time there is:
the pod's grace period (chart value `nodeFailure.terminationGraceSeconds`, 30 s by default),
after which SIGKILL comes.

    import tfhelm_preemption as preemption
    while step < steps:
        train_step()
        if preemption.requested():
            manager.save(checkpoint_number=step)
            preemption.leave()

    model.fit(..., callbacks=[preemption.SaveOnPreemption(manager)])   # Keras 2 or 3

One process decides alone: right for a single worker, the chief of an in-graph
(ParameterServerStrategy) training, worker 0 of a between-graph one. Under
MultiWorkerMirroredStrategy every worker must save at the same step: TensorFlow's
tf.distribute.experimental.PreemptionCheckpointHandler agrees on it (docs/nodes.md).

Standard library only (TensorFlow is imported for the Keras callback alone): the chart ships
it as `tfhelm_preemption.py`; tfhelm's package has it as tfhelm.pod.preemption.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

EXIT_STATUS = 128 + signal.SIGTERM  # 143, what a process ended by SIGTERM reports
_notice = threading.Event()
_received: list[float] = []  # when SIGTERM came (time.time())


def _take_note(signum, frame) -> None:
    if not _received:
        print(f"tfhelm_preemption: {signal.Signals(signum).name}: saving at the next step, then "
              "leaving", file=sys.stderr, flush=True)
    _received.append(time.time())
    _notice.set()


def install() -> bool:
    """Take note of SIGTERM instead of dying of it (done on import). False where Python allows
    no handler (not the main thread)."""
    try:
        signal.signal(signal.SIGTERM, _take_note)
    except ValueError:
        return False
    return True


def requested() -> bool:
    """True once SIGTERM came: save now, then `leave()`."""
    return _notice.is_set()


def received_at() -> float | None:
    """When SIGTERM came (epoch seconds), or None."""
    return _received[0] if _received else None


def leave() -> None:
    """End the script as SIGTERM would have: exit status 143 (raises SystemExit)."""
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(EXIT_STATUS)


def SaveOnPreemption(save):  # noqa: N802 - used like the Keras callback class it makes
    """A Keras callback (tf.keras: Keras 2 with TF_USE_LEGACY_KERAS=1, else Keras 3): after the
    batch during which SIGTERM came, it saves and leaves. `save`: a tf.train.CheckpointManager
    (saved with the optimizer's step as checkpoint number) or a function of that step."""
    import tensorflow as tf

    class _SaveOnPreemption(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if not requested():
                return
            step = int(self.model.optimizer.iterations.numpy())
            if hasattr(save, "save"):
                save.save(checkpoint_number=step)
            else:
                save(step)
            print(f"tfhelm_preemption: saved at step {step}", file=sys.stderr, flush=True)
            self.model.stop_training = True
            leave()

    return _SaveOnPreemption()


install()
