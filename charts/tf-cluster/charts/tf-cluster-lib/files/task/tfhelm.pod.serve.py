# tfhelm/pod/serve.py without its prose (make chart-files)
from __future__ import annotations
import os
import signal
import sys
import threading
from tfhelm import contract
from tfhelm.pod import fence
from tfhelm.pod.logs import log
from tfhelm.pod.metrics import start_metrics
from tfhelm.pod.supervise import replaced
from tfhelm.pod.tfconfig import LaunchError, training_cluster
STOP_DELAY = contract.env("stopDelay")
def serve(config: dict) -> int:
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    fenced = fence.guard(replaced())
    start_metrics(config)
    import tensorflow as tf
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    task_type, index = resolver.task_type, resolver.task_id
    if task_type not in ("ps", "worker", "chief"):
        raise LaunchError(f"a {task_type} task runs a script, not a server")
    server = tf.distribute.Server(
        training_cluster(resolver.cluster_spec().as_dict()),
        job_name=task_type,
        task_index=index,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    address = config["cluster"][task_type][index]
    log(f"{task_type}:{index} serving on {address} ({server.target}); "
        "stops on SIGTERM")
    stop = threading.Event()
    received: list[int] = []
    def on_signal(signum, _frame):
        received.append(signum)
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    joiner = threading.Thread(target=server.join, name="tf-server-join", daemon=True)
    joiner.start()
    while not stop.wait(1.0):
        if not joiner.is_alive():
            log(f"{task_type}:{index} server stopped by itself")
            return 1
    delay = _stop_delay()
    if delay:
        if fenced is not None:
            fenced.set()
        log(f"{task_type}:{index} {signal.Signals(received[0]).name}: serving {delay:g}s more, so a "
            "chief stopped at the same time can save, then stopping")
        stop.clear()
        stop.wait(delay)
    log(f"{task_type}:{index} stopping on {signal.Signals(received[0]).name}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + received[0])
def _stop_delay() -> float:
    try:
        return max(0.0, float(os.environ.get(STOP_DELAY, "0")))
    except ValueError:
        return 0.0
