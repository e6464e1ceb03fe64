"""`launcher.py server`: this task's TF server (a PS, or a worker driven by a chief in-graph)
until SIGTERM. TensorFlow is imported here only: the other modes never pay for it."""

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
    """Start this task's gRPC server and serve until SIGTERM/SIGINT.

    `server.join()` never returns: a PS (or a worker driven by a chief) has no way to know
    that training is over. Whoever decides that (the reaper in the cluster, `tfhelm run
    --local` here) sends SIGTERM; the launcher then leaves with 128 + the signal number
    (143), as a process killed by it would: at once, or in a pod after the chart's stop delay
    (a chief stopped by the same drain may still be saving the variables served here). Not
    0 on purpose: a worker server pod that is evicted mid-training must count as failed, so
    its Indexed Job brings the index back (the coordinator re-adds the worker), not as a
    completed index that never returns.
    The join runs in a daemon thread so the main thread can take the signal (Python runs
    signal handlers only on the main thread, and not while it is blocked in C++).
    """
    # Report worker/PS failures to the coordinator instead of retrying forever (the
    # documented setting for ParameterServerStrategy clusters).
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    fenced = fence.guard(replaced())  # no second server of this task once another pod owns it
    start_metrics(config)
    import tensorflow as tf  # noqa: PLC0415 - lazy on purpose: heavy, and only servers need it

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
    while not stop.wait(1.0):  # wake now and then so signals are handled promptly
        if not joiner.is_alive():
            log(f"{task_type}:{index} server stopped by itself")
            return 1
    delay = _stop_delay()
    if delay:
        # A drain or a preemption stops the chief at the same moment; its variables live here:
        # serve on a while, so it can still save them (tfhelm_preemption). A second signal ends
        # it. The fence stands down: a Deployment's new PS may start meanwhile, and this one is
        # leaving anyway (it serves only the connections it has: the Service sends new ones there).
        if fenced is not None:
            fenced.set()
        log(f"{task_type}:{index} {signal.Signals(received[0]).name}: serving {delay:g}s more, so a "
            "chief stopped at the same time can save, then stopping")
        stop.clear()
        stop.wait(delay)
    log(f"{task_type}:{index} stopping on {signal.Signals(received[0]).name}")
    # TensorFlow's gRPC server cannot be shut down cleanly; leave without running its
    # destructors (which can block) - there is nothing to flush in a server task.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + received[0])


def _stop_delay() -> float:
    """Seconds to serve on after SIGTERM: the chart's (a third of the grace period); none in a
    local run."""
    try:
        return max(0.0, float(os.environ.get(STOP_DELAY, "0")))
    except ValueError:
        return 0.0
