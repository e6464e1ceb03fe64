"""Waiting on a TF cluster with visible progress (rich). Three watches wake it at each
change (the reaper's feeds): the cluster's Jobs and PS Deployments, whose counters (ready,
succeeded) make the progress, so an update costs the same whatever the number of workers,
and the finishing role's Succeeded pods, so the end is seen at the last task's pod event
(training.py's rule), before the Job controller has counted it. The pods are read in full
once, at the end."""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from tfhelm.apierrors import refusal
from tfhelm.cluster import feed, objects, report, training
from tfhelm.cluster.spec import Shape
from tfhelm.console import printable
from tfhelm.errors import TimedOut, TrainingFailed
from tfhelm.contract import KUEUE_JOB_UID, ROLE_LABEL
from tfhelm.jsonobject import JsonObject
from tfhelm.watches import Watches

if TYPE_CHECKING:  # passed in
    from tfhelm.kube import Kube

JOB_ROLES = ("chief", "worker", "evaluator")


def counts(jobs: list[training.JobRow], deployments: list, finishing: str,
           pods: training.SucceededTasks | None = None) -> tuple[int, int]:
    """(tasks started, `finishing` tasks succeeded) from the counters the controllers keep:
    a Job task is started while its pod is ready or once it succeeded, a PS once its
    Deployment has a ready replica; succeeded ones also as the pods say. Only the current
    generation's Jobs count."""
    current = training.current_jobs(jobs)
    started = sum(min(j.ready + j.succeeded, j.total) for role, j in current.items() if role in JOB_ROLES)
    finished = current.get(finishing)
    return started + report.ps_counts(deployments)[1], training.tasks_succeeded(finished, pods) if finished else 0


def feeds(kube: Kube, namespace: str, name: str, finishing: str, events: queue.Queue,
          watches: Watches, queued: bool = False) -> list[feed.Feed]:
    """The cluster's Jobs, PS Deployments and `finishing` Succeeded pods onto `events`; a
    queued cluster's Kueue Workloads too (those of the namespace's Jobs: the worker Job's uid
    is not known yet)."""
    sel, stop = objects.selector(name), threading.Event()
    ps, pods = f"{sel},{ROLE_LABEL}=ps", f"{sel},{ROLE_LABEL}={finishing}"

    def of(name: str, what: str, kind: str, selector: str) -> feed.Feed:
        return feed.Feed(name, what, lambda: kube.listing(kind, namespace, selector),
                         lambda rv, t: kube.watch(watches, kind, namespace, selector, rv, t), events, stop,
                         refused=refusal)
    return [of("jobs", "Jobs", "Job", sel), of("deployments", "Deployments", "Deployment", ps),
            feed.Feed("pods", "pods", lambda: kube.succeeded_pods(namespace, pods),
                      lambda rv, t: kube.watch_succeeded_pods(watches, namespace, pods, rv, t), events, stop,
                      optional="no read access to pods", refused=refusal),
            *([of("workloads", "Kueue Workloads", "Workload", KUEUE_JOB_UID)] if queued else [])]


class ConsoleBars:
    """How `tfhelm up --wait` shows a wait on a rich Console: live bars on a terminal, one
    plain line per change on a pipe or in a log file. (The Python API has one for Jupyter:
    tfhelm/api/display.py; any object with these four methods will do.)"""

    def __init__(self, console: Console):
        self.console = console
        self._bar: Progress | None = None
        self._ids: list = []
        self._labels: list[str] = []
        self._last: list[int] | None = None

    def start(self, bars: list[tuple[str, int]]) -> None:
        """Bars of (label, total), at 0."""
        self._labels = [label for label, _ in bars]
        self._totals = [total for _, total in bars]
        if self.console.is_terminal:
            self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), console=self.console, transient=False)
            self._bar.start()
            self._ids = [self._bar.add_task(label, total=total) for label, total in bars]

    def update(self, counts: list[int]) -> None:
        if self._bar:
            for task, n in zip(self._ids, counts):
                self._bar.update(task, completed=n)
        elif counts != self._last:
            self.console.print(", ".join(f"{label}: {n}/{total}" for label, n, total
                                         in zip(self._labels, counts, self._totals)),
                               markup=False, highlight=False, soft_wrap=True)
        self._last = counts

    def note(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def stop(self) -> None:
        if self._bar:
            self._bar.stop()


def wait_for_training(kube: Kube, namespace: str, name: str, shape: Shape, display: Console | ConsoleBars,
                      timeout: float = 3600, until: str = "done", queued: bool = False) -> tuple[str, bool]:
    """Until the training is decided (the reaper's rule); returns "Complete" or "Failed",
    and whether the pods only ran on simulated (kwok) nodes, where no container runs.
    `until="serving"`: until every task started (an in-graph cluster of servers, which its
    client drives), then "Serving". `display`: a rich Console (ConsoleBars) or bars of its own.
    `queued`: the cluster waits in a Kueue queue; where it stands is a note at each change."""
    bars = ConsoleBars(display) if isinstance(display, Console) else display
    total = sum(shape.count(r) for r in ("chief", "worker", "ps", "evaluator"))
    finishing = "chief" if shape.chief else "worker"
    goal = 1 if shape.chief else shape.workers
    deadline = time.monotonic() + timeout
    shown = [(f"tasks of {namespace}/{name} started", total)]
    if until == "done":
        shown.append((f"{finishing} tasks succeeded", goal))
    events: queue.Queue = queue.Queue()
    watches = Watches()
    running = [f.start() for f in feeds(kube, namespace, name, finishing, events, watches, queued)]
    seen, place = _Seen(bars), None
    bars.start(shown)
    try:
        while True:
            try:
                left = deadline - time.monotonic()
                if left <= 0:  # also when events keep coming
                    raise queue.Empty
                seen.apply(events.get(timeout=left))
            except queue.Empty:
                waited = "training not finished" if until == "done" else "tasks not all started"
                raise TimedOut(f"{namespace}/{name}: {waited} after {timeout:.0f}s (--timeout)") from None
            while not events.empty():  # what came meanwhile, then one update for all
                seen.apply(events.get_nowait())
            if not {"jobs", "deployments"} <= seen.listed:
                continue
            if not seen.objects["jobs"]:  # `up` made them: gone means removed meanwhile
                raise TrainingFailed(f"{namespace}/{name} was removed while waiting (its Jobs are "
                                     "gone: `tfhelm down`?); the training did not finish")
            jobs = training.job_rows(seen.objects["jobs"].values())
            if queued and (stands := _standing(kube, namespace, jobs, seen)) != place:
                place = stands
                if stands:
                    bars.note(printable(f"queue: {stands}"))
            now = counts(jobs, list(seen.objects["deployments"].values()), finishing, seen.pods)
            now = (min(now[0], total), min(now[1], goal))
            bars.update(list(now[:len(shown)]))
            outcome = training.training_done(jobs, pods=seen.pods) if until == "done" else (
                "Serving" if now[0] >= total else None)
            if outcome:
                break
    finally:
        feed.end(running, watches.stop)
        bars.stop()
    return outcome, objects.ran_only_on_simulated_nodes(kube, namespace, name)


def _standing(kube: Kube, namespace: str, jobs: list[training.JobRow], seen: "_Seen") -> str | None:
    """Where the queued cluster stands, as a line: read again only when its Job or Workload
    changed (one Workload read and, for the reason, one ClusterQueue read)."""
    workers = training.current_jobs(jobs).get("worker")
    if workers is None:
        return None
    mine = [w for w in seen.objects["workloads"].values()
            if (w.metadata.labels or {}).get(KUEUE_JOB_UID) == workers.uid]
    key = (workers.uid, workers.suspended, tuple(str(w.metadata.resource_version) for w in mine))
    if key != seen.queue_key:
        seen.queue_key = key
        info = report.queue_info(kube, namespace, jobs)
        seen.queue_line = f"{info.state}: {info.line}" if info else None
    return seen.queue_line


class _Seen:
    """What the feeds told so far: the Jobs and PS Deployments (JSON, by uid), the
    Succeeded pods (counts)."""

    def __init__(self, bars: ConsoleBars):
        self.bars = bars
        self.objects: dict[str, dict] = {"jobs": {}, "deployments": {}, "workloads": {}}
        self.queue_key, self.queue_line = None, None
        self.pods, self.listed, self.unreachable = training.SucceededTasks(), set(), False

    def apply(self, event) -> None:
        match event:
            case feed.Fatal(error):
                raise error
            case feed.WatchFailed(reason) if not self.unreachable:
                self.unreachable = True  # one line; the feeds retry until the timeout
                self.bars.note(printable(f"API server unreachable, retrying ({reason})"))
            case feed.Listed("pods", items):
                self.pods = training.SucceededTasks()
                for item in items:
                    self.pods.add(item["metadata"])
            case feed.Listed(kind, items):
                self.objects[kind] = {o["metadata"]["uid"]: JsonObject(o) for o in items}
                self.listed.add(kind)
            case feed.Changed("pods", _, item):  # even DELETED: it did succeed
                self.pods.add(item["metadata"])
            case feed.Changed(kind, "DELETED", o):
                self.objects[kind].pop(o["metadata"]["uid"], None)
            case feed.Changed(kind, _, o):
                self.objects[kind][o["metadata"]["uid"]] = JsonObject(o)
