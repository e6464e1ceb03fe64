"""Waiting on a TF cluster with visible progress (rich), polling the API once a second."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from tfhelm import status
from tfhelm.errors import TfhelmError
from tfhelm.kube import Kube
from tfhelm.spec import Shape


def wait_for_training(kube: Kube, namespace: str, name: str, shape: Shape, console: Console,
                      timeout: float = 3600, poll: float = 1.0) -> str:
    """Until the training is decided (the reaper's rule); returns "Complete" or "Failed"."""
    total = sum(shape.count(r) for r in ("chief", "worker", "ps", "evaluator"))
    finishing = "chief" if shape.chief else "worker"
    goal = 1 if shape.chief else shape.workers
    deadline = time.monotonic() + timeout
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  MofNCompleteColumn(), console=console, transient=False) as bar:
        started = bar.add_task(f"tasks of {namespace}/{name} started", total=total)
        done = bar.add_task(f"{finishing} tasks succeeded", total=goal)
        while True:
            objs = kube.objects(namespace, name)
            live = {r.task for r in status.task_rows(objs) if r.phase in ("Running", "Succeeded")}
            jobs = status.job_rows(objs)
            current = status.current_jobs(jobs).get(finishing)  # not an old generation's Job
            succeeded = current.succeeded if current else 0
            bar.update(started, completed=min(len(live), total))
            bar.update(done, completed=min(succeeded, goal))
            outcome = status.training_done(jobs)
            if outcome:
                return outcome
            if time.monotonic() > deadline:
                raise TfhelmError(f"{namespace}/{name}: training not finished after {timeout:.0f}s")
            time.sleep(poll)
