"""Waiting on a TF cluster with visible progress (rich), polling the API once a second."""

from __future__ import annotations

import contextlib
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from tfhelm import status, training
from tfhelm.errors import TimedOut
from tfhelm.kube import Kube
from tfhelm.spec import Shape


def wait_for_training(kube: Kube, namespace: str, name: str, shape: Shape, console: Console,
                      timeout: float = 3600, poll: float = 1.0) -> tuple[str, bool]:
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
    last = None
    with bar or contextlib.nullcontext():
        if bar:
            started = bar.add_task(started_text, total=total)
            done = bar.add_task(done_text, total=goal)
        while True:
            objs = kube.objects(namespace, name)
            live = {r.task for r in status.task_rows(objs) if r.phase in ("Running", "Succeeded")}
            jobs = training.job_rows(objs.jobs)
            current = training.current_jobs(jobs).get(finishing)  # not an old generation's Job
            succeeded = current.succeeded if current else 0
            counts = (min(len(live), total), min(succeeded, goal))
            if bar:
                bar.update(started, completed=counts[0])
                bar.update(done, completed=counts[1])
            elif counts != last:
                console.print(f"{started_text}: {counts[0]}/{total}, {done_text}: {counts[1]}/{goal}",
                              markup=False, highlight=False, soft_wrap=True)
            last = counts
            outcome = training.training_done(jobs)
            if outcome:
                return outcome, bool(objs.pods) and kube.simulated_nodes(objs.pods) == {
                    p.spec.node_name for p in objs.pods if p.spec.node_name}
            if time.monotonic() > deadline:
                raise TimedOut(f"{namespace}/{name}: training not finished after {timeout:.0f}s (--timeout)")
            time.sleep(poll)
