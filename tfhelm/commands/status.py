"""`tfhelm status NAME`: a TF cluster's tasks, Jobs and parameter servers (`Cluster.status()`
reads them; this module reads the options and prints)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors

if TYPE_CHECKING:
    from tfhelm.api import Status, TaskStatus


@cli_errors
def status(name: o.ClusterName, namespace: o.Namespace = None, output: o.Output = "table",
           tasks: Annotated[bool, typer.Option("--tasks", help="List every task (beyond 20 tasks "
                                               "the table shows counts per phase and the exceptions).")] = False):
    """Tasks, Job progress and parameter-server state of a TF cluster (exit 1: training failed,
    or its Jobs were deleted)."""
    from tfhelm.api import clusters
    from tfhelm.console import err, line
    from tfhelm.errors import TrainingFailed
    from tfhelm.output import check_format, emit

    fmt = check_format(output)
    s = clusters.Cluster(name, namespace).status()
    if s.interrupted:
        line(s.interrupted, err)
    if fmt != "table":
        emit(s.to_dict(), fmt)
    else:
        print_table(s, every_task=tasks)
    # The same exit code whatever the format: a script reads it without parsing the report.
    if s.training in ("Failed", "Deleted"):
        raise typer.Exit(TrainingFailed.exit_code)


def print_table(s: Status, every_task: bool = False) -> None:
    """The people's view: every task of a small cluster (or with `every_task`); of a larger
    one the Jobs, the tasks per role and phase, and the exceptions (bounded)."""
    from tfhelm.cluster.report import (EXCEPTIONS_SHOWN, FULL_LISTING, PHASE_ORDER, error_lines, exceptions,
                                       ps_state)
    from tfhelm.console import line
    from tfhelm.output import table

    def task_table(shown: list[TaskStatus], title: str = "") -> None:
        table(("TASK", "POD", "PHASE", "RESTARTS", "NODE"),
              [(r.task, r.pod, f"{r.phase} ({r.reason})" if r.reason else r.phase, r.restarts, r.node)
               for r in shown], title=title)

    title = f"TF cluster {s.namespace}/{s.cluster}"
    summarize = len(s.tasks) > FULL_LISTING and not every_task
    if not summarize:
        task_table(s.tasks, title)
    for j in s.jobs:
        line(f"job {j.name}: {j.succeeded}/{j.total} succeeded, {j.failed} failed — {j.state}")
    if summarize:
        counts = s.phases
        phases = [p for p in PHASE_ORDER if any(p in c for c in counts.values())]
        phases += sorted({p for c in counts.values() for p in c} - set(phases))
        table(("ROLE", "TASKS", *(p.upper() for p in phases)),
              [(role, sum(c.values()), *(c.get(p, "") for p in phases)) for role, c in counts.items()],
              title=f"{title}: {len(s.tasks)} tasks")
        odd = exceptions(s.tasks)
        if odd:
            more = f", the first {EXCEPTIONS_SHOWN} below" if len(odd) > EXCEPTIONS_SHOWN else ""
            line(f"{len(odd)} of {len(s.tasks)} tasks not Running or Succeeded, or restarted{more} "
                 "(--tasks lists every task):")
            task_table(odd[:EXCEPTIONS_SHOWN])
        else:
            line(f"all {len(s.tasks)} tasks Running or Succeeded, none restarted (--tasks lists every task)")
    for text in error_lines(s.tasks):
        line(text)
    if s.queue:
        line(f"queue: {s.queue.state}: {s.queue.message}")
    if s.gone_jobs:
        line(f"training: the {', '.join(s.gone_jobs)} Job(s) of this cluster are gone (deleted, or removed "
             "after they finished): nothing trains any more")
    line(f"parameter servers: {ps_state(s.parameter_servers.total, s.parameter_servers.ready)}")
    for text in s.reaper:
        line(text)
