"""`tfhelm logs`: every task's log, each line prefixed with its task (`[worker-3] ...`),
the way `tfhelm run --local` prints them. The NOTES' `kubectl logs job/NAME` shows one pod
of many; this shows them all, and with `follow` picks up pods as they start or restart."""

from __future__ import annotations

import threading
import time
from typing import Callable

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from tfhelm import status
from tfhelm.kube import Kube

CONTAINER = "tensorflow"  # the task container of every role's pod
Write = Callable[[str], None]
STARTED = ("Running", "Succeeded", "Failed")  # phases whose container has (or had) a log


def prefix(task: str) -> str:
    """`worker:3` -> `[worker-3] `, padded so the lines of a cluster line up."""
    return f"[{task.replace(':', '-')}] "


def prefixed(task: str, text: str, width: int = 0) -> list[str]:
    """One task's log text as prefixed lines (no trailing newline)."""
    head = prefix(task).ljust(width)
    return [head + line for line in text.splitlines()]


def tasks(kube: Kube, namespace: str, name: str) -> list[status.TaskRow]:
    """The cluster's task pods (paged JSON: `follow` polls this)."""
    return status.task_rows(kube.task_pods(namespace, name))


def show(kube: Kube, namespace: str, name: str, write: Write, note: Write,
         tail: int | None = None) -> int:
    """Print every task's log so far, task by task in status order. Returns the number of
    tasks printed; tasks without a log yet get a note (on stderr) instead."""
    rows = tasks(kube, namespace, name)
    width = max((len(prefix(r.task)) for r in rows), default=0)
    shown = 0
    for r in rows:
        if r.phase not in STARTED:
            note(f"{prefix(r.task)}no log yet: pod {r.pod} is {r.phase}")
            continue
        try:
            text = kube.core.read_namespaced_pod_log(r.pod, namespace, container=CONTAINER,
                                                     tail_lines=tail)
        except (ApiException, HTTPError, OSError) as e:
            note(f"{prefix(r.task)}cannot read the log of pod {r.pod}: {_reason(e)}")
            continue
        for line in prefixed(r.task, text, width):
            write(line)
        shown += 1
    return shown


def follow(kube: Kube, namespace: str, name: str, write: Write, note: Write,
           poll: float = 2.0, tail: int | None = None) -> None:
    """Stream every task's log as it is written, starting a stream for each pod once it
    runs (restarted tasks included). Returns once no stream is open and no task pod is
    Pending or Running (PS run until reaped: stop with Ctrl-C)."""
    lock = threading.Lock()
    started: dict[str, threading.Thread] = {}

    def locked(line: str) -> None:
        with lock:
            write(line)

    while True:
        rows = tasks(kube, namespace, name)
        width = max((len(prefix(r.task)) for r in rows), default=0)
        for r in rows:
            if r.pod not in started and r.phase in STARTED:
                t = threading.Thread(target=_stream, daemon=True,
                                     args=(kube, namespace, r, width, locked, note))
                started[r.pod] = t
                t.start()
        live = any(t.is_alive() for t in started.values())
        if not live and not any(r.phase in ("Pending", "Running") for r in rows):
            return
        time.sleep(poll)


def _stream(kube: Kube, namespace: str, row: status.TaskRow, width: int, write: Write,
            note: Write) -> None:
    head = prefix(row.task).ljust(width)
    try:
        resp = kube.core.read_namespaced_pod_log(row.pod, namespace, container=CONTAINER,
                                                 follow=True, _preload_content=False)
        buf = b""
        for chunk in resp.stream(4096):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                write(head + line.decode(errors="replace"))
        if buf:
            write(head + buf.decode(errors="replace"))
    except (ApiException, HTTPError, OSError) as e:
        note(f"{prefix(row.task)}log of pod {row.pod} ended: {_reason(e)}")


def _reason(e: Exception) -> str:
    if isinstance(e, ApiException):
        return f"{e.status} {e.reason}"
    return type(e).__name__
