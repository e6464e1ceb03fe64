# tfhelm/pod/preemption.py without its prose (make chart-files); docs/nodes.md tells its use
from __future__ import annotations
import signal
import sys
import threading
import time
EXIT_STATUS = 128 + signal.SIGTERM
_notice = threading.Event()
_received: list[float] = []
def _take_note(signum, frame) -> None:
    if not _received:
        print(f"tfhelm_preemption: {signal.Signals(signum).name}: saving at the next step, then "
              "leaving", file=sys.stderr, flush=True)
    _received.append(time.time())
    _notice.set()
def install() -> bool:
    try:
        signal.signal(signal.SIGTERM, _take_note)
    except ValueError:
        return False
    return True
def requested() -> bool:
    return _notice.is_set()
def received_at() -> float | None:
    return _received[0] if _received else None
def leave() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(EXIT_STATUS)
def SaveOnPreemption(save):
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
