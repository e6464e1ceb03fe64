"""Waiting on a TF cluster with visible progress (rich). Three watches wake it at each
change (the reaper's feeds): the cluster's Jobs and PS Deployments, whose counters (ready,
succeeded) make the progress, so an update costs the same whatever the number of workers,
and the finishing role's Succeeded pods, so the end is seen at the last task's pod event
(training.py's rule), before the Job controller has counted it. The pods are read in full
once, at the end."""

from __future__ import annotations

import contextlib
import queue
import threading
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from tfhelm.cluster import feed, report, training
from tfhelm.cluster.spec import Shape
from tfhelm.errors import TimedOut
from tfhelm.kube import CLUSTER_LABEL, ROLE_LABEL, JsonObject, Kube, Watches

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
          watches: Watches) -> list[feed.Feed]:
    """The cluster's Jobs, PS Deployments and `finishing` Succeeded pods onto `events`."""
    sel, stop = f"{CLUSTER_LABEL}={name}", threading.Event()
    ps, pods = f"{sel},{ROLE_LABEL}=ps", f"{sel},{ROLE_LABEL}={finishing}"

    def of(name: str, what: str, kind: str, selector: str) -> feed.Feed:
        return feed.Feed(name, what, lambda: kube.listing(kind, namespace, selector),
                         lambda rv, t: kube.watch(watches, kind, namespace, selector, rv, t), events, stop)
    return [of("jobs", "Jobs", "Job", sel), of("deployments", "Deployments", "Deployment", ps),
            feed.Feed("pods", "pods", lambda: kube.succeeded_pods(namespace, pods),
                      lambda rv, t: kube.watch_succeeded_pods(watches, namespace, pods, rv, t), events, stop,
                      optional="no read access to pods")]


def wait_for_training(kube: Kube, namespace: str, name: str, shape: Shape, console: Console,
                      timeout: float = 3600) -> tuple[str, bool]:
    """Until the training is decided (the reaper's rule); returns "Complete" or "Failed",
    and whether the pods only ran on simulated (kwok) nodes, where no container runs."""
    total = sum(shape.count(r) for r in ("chief", "worker", "ps", "evaluator"))
    finishing = "chief" if shape.chief else "worker"
    goal = 1 if shape.chief else shape.workers
    deadline = time.monotonic() + timeout
    started_text, done_text = f"tasks of {namespace}/{name} started", f"{finishing} tasks succeeded"
    # A terminal gets live bars; a pipe or a log file gets one plain line per change.
    bar = (Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), console=console, transient=False)
           if console.is_terminal else None)
    events: queue.Queue = queue.Queue()
    watches = Watches()
    running = [f.start() for f in feeds(kube, namespace, name, finishing, events, watches)]
    seen, last = _Seen(console), None
    try:
        with bar or contextlib.nullcontext():
            if bar:
                started = bar.add_task(started_text, total=total)
                done = bar.add_task(done_text, total=goal)
            while True:
                try:
                    left = deadline - time.monotonic()
                    if left <= 0:  # also when events keep coming
                        raise queue.Empty
                    seen.apply(events.get(timeout=left))
                except queue.Empty:
                    raise TimedOut(f"{namespace}/{name}: training not finished after {timeout:.0f}s "
                                   "(--timeout)") from None
                while not events.empty():  # what came meanwhile, then one update for all
                    seen.apply(events.get_nowait())
                if seen.listed != {"jobs", "deployments"}:
                    continue
                jobs = training.job_rows(seen.objects["jobs"].values())
                now = counts(jobs, list(seen.objects["deployments"].values()), finishing, seen.pods)
                now = (min(now[0], total), min(now[1], goal))
                if bar:
                    bar.update(started, completed=now[0])
                    bar.update(done, completed=now[1])
                elif now != last:
                    console.print(f"{started_text}: {now[0]}/{total}, {done_text}: {now[1]}/{goal}",
                                  markup=False, highlight=False, soft_wrap=True)
                last = now
                outcome = training.training_done(jobs, pods=seen.pods)
                if outcome:
                    break
    finally:
        feed.end(running, watches.stop)
    return outcome, kube.ran_only_on_simulated_nodes(namespace, name)


class _Seen:
    """What the feeds told so far: the Jobs and PS Deployments (JSON, by uid), the
    Succeeded pods (counts)."""

    def __init__(self, console: Console):
        self.console = console
        self.objects: dict[str, dict] = {"jobs": {}, "deployments": {}}
        self.pods, self.listed, self.unreachable = training.SucceededTasks(), set(), False

    def apply(self, event) -> None:
        match event:
            case feed.Fatal(error):
                raise error
            case feed.WatchFailed(reason) if not self.unreachable:
                self.unreachable = True  # one line; the feeds retry until the timeout
                self.console.print(f"API server unreachable, retrying ({reason})", markup=False,
                                   highlight=False, soft_wrap=True)
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
