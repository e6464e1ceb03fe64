"""Waiting on a TF cluster with visible progress (rich), polling once a second. A poll reads
the cluster's Jobs and PS Deployments only (their counters: ready, succeeded), so its cost
does not grow with the number of workers; the pods are read once, at the end."""

from __future__ import annotations

import contextlib
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from tfhelm import status, training
from tfhelm.errors import TimedOut
from tfhelm.kube import Kube
from tfhelm.spec import Shape

JOB_ROLES = ("chief", "worker", "evaluator")


def counts(jobs: list[training.JobRow], deployments: list, finishing: str) -> tuple[int, int]:
    """(tasks started, `finishing` tasks succeeded) from the counters the controllers keep:
    a Job task is started while its pod is ready or once it succeeded, a PS once its
    Deployment has a ready replica. Only the current generation's Jobs count."""
    current = training.current_jobs(jobs)
    started = sum(min(j.ready + j.succeeded, j.total) for role, j in current.items() if role in JOB_ROLES)
    finished = current.get(finishing)
    return started + status.ps_counts(deployments)[1], finished.succeeded if finished else 0


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
            job_objects, deployments = kube.workloads(namespace, name)
            jobs = training.job_rows(job_objects)
            now = counts(jobs, deployments, finishing)
            now = (min(now[0], total), min(now[1], goal))
            if bar:
                bar.update(started, completed=now[0])
                bar.update(done, completed=now[1])
            elif now != last:
                console.print(f"{started_text}: {now[0]}/{total}, {done_text}: {now[1]}/{goal}",
                              markup=False, highlight=False, soft_wrap=True)
            last = now
            outcome = training.training_done(jobs)
            if outcome:
                return outcome, kube.ran_only_on_simulated_nodes(namespace, name)
            if time.monotonic() > deadline:
                raise TimedOut(f"{namespace}/{name}: training not finished after {timeout:.0f}s (--timeout)")
            time.sleep(poll)
