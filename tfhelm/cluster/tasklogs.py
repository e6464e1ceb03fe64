"""`tfhelm logs`: every task's log, each line prefixed with its task (`[worker-3] ...`),
the way `tfhelm run --local` prints them. The NOTES' `kubectl logs job/NAME` shows one pod
of many; this shows them all, and with `follow` picks up pods as they start or restart."""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

from urllib3.exceptions import HTTPError

from tfhelm.cluster import objects, report
from tfhelm.errors import TfhelmError
from tfhelm.kube import Kube

T = TypeVar("T")
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


def tasks(kube: Kube, namespace: str, name: str, task: str | None = None) -> list[tuple[report.TaskRow, list[str]]]:
    """The cluster's task pods (or one task's: `worker:3`), each with the containers that have
    a log to show (paged JSON: `follow` polls this; only names are kept, whatever the
    cluster's size)."""
    shown: dict[str, list[str]] = {}

    def remember(pods):
        for pod in pods:
            shown[pod["metadata"]["name"]] = log_containers(pod)
            yield pod
    return [(r, shown[r.pod]) for r in report.task_rows(remember(objects.task_pods(kube, namespace, name)))
            if task is None or r.task == task]


def log_containers(pod: dict) -> list[str]:
    """A pod's containers with a log worth showing: its init containers that failed or still
    run (a code fetch that failed says why there), then the task container once it started."""
    st = pod.get("status") or {}
    names = []
    for c in st.get("initContainerStatuses") or []:
        state = c.get("state") or {}
        if "running" in state or (state.get("terminated") or {}).get("exitCode"):
            names.append(c["name"])
    main = next((c for c in st.get("containerStatuses") or [] if c.get("name") == CONTAINER), None)
    never_ran = main is not None and set(main.get("state") or {}) <= {"waiting"} and \
        not (main.get("lastState") or {}).get("terminated")
    if st.get("phase") in STARTED and not never_ran:
        names.append(CONTAINER)
    return names


def label(task: str, container: str) -> str:
    """The prefix's task part: `worker:3`, or `worker:3 fetch-code` for an init container."""
    return task if container == CONTAINER else f"{task} {container}"


def show(kube: Kube, namespace: str, name: str, write: Write, note: Write,
         tail: int | None = None, task: str | None = None) -> int:
    """Print every task's log so far, task by task in status order. Returns the number of
    logs printed; tasks without a log yet get a note (on stderr) instead."""
    found = tasks(kube, namespace, name, task)
    width = max((len(prefix(label(r.task, c))) for r, cs in found for c in cs), default=0)
    shown = 0
    for r, containers in found:
        if not containers:
            note(f"{prefix(r.task)}no log yet: pod {r.pod} is {r.phase}")
        for container in containers:
            text = _opened(lambda: kube.pod_log(namespace, r.pod, container, tail),
                           label(r.task, container), r.pod, note)
            if text is None:
                continue
            for line in prefixed(label(r.task, container), text, width):
                write(line)
            shown += 1
    return shown


def follow(kube: Kube, namespace: str, name: str, write: Write, note: Write,
           poll: float = 2.0, tail: int | None = None, task: str | None = None) -> None:
    """Stream every task's log as it is written, starting a stream for each container once
    it runs (restarted tasks and init containers included). Returns once no stream is open
    and no task pod is Pending or Running (PS run until reaped: stop with Ctrl-C)."""
    lock = threading.Lock()
    started: dict[tuple[str, str], threading.Thread] = {}

    def locked(line: str) -> None:
        with lock:
            write(line)

    while True:
        found = tasks(kube, namespace, name, task)
        width = max((len(prefix(label(r.task, c))) for r, cs in found for c in cs), default=0)
        for r, containers in found:
            for container in containers:
                if (r.pod, container) not in started:
                    t = threading.Thread(target=_stream, daemon=True,
                                         args=(kube, namespace, r, container, width, locked, note, tail))
                    started[(r.pod, container)] = t
                    t.start()
        live = any(t.is_alive() for t in started.values())
        if not live and not any(r.phase in ("Pending", "Running") for r, _ in found):
            return
        time.sleep(poll)


def _stream(kube: Kube, namespace: str, row: report.TaskRow, container: str, width: int,
            write: Write, note: Write, tail: int | None) -> None:
    head = prefix(label(row.task, container)).ljust(width)
    chunks = _opened(lambda: kube.follow_pod_log(namespace, row.pod, container, tail),
                     label(row.task, container), row.pod, note)
    if chunks is None:
        return
    try:
        buf = b""
        for chunk in chunks:
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                write(head + line.decode(errors="replace"))
        if buf:
            write(head + buf.decode(errors="replace"))
    except (HTTPError, OSError) as e:  # the connection, lost while streaming
        note(f"{prefix(label(row.task, container))}log of pod {row.pod} ended: {type(e).__name__}")


def _opened(read: Callable[[], T | None], task: str, pod: str, note: Write) -> T | None:
    """A log read or stream, opened; None, after a note saying why, when it cannot be."""
    try:
        opened = read()
    except TfhelmError as e:  # names the pod
        note(f"{prefix(task)}{e}")
        return None
    if opened is None:
        note(f"{prefix(task)}no log: pod {pod} is gone")
    return opened
