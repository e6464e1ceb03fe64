"""`tfhelm logs NAME`: every task's log, prefixed by task; `-f` follows them all."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err, out


@cli_errors
def logs(name: o.ClusterName, namespace: o.Namespace = None,
         follow: Annotated[bool, typer.Option(
             "--follow", "-f", help="Stream new lines, from every task, until all have ended.")] = False,
         tail: Annotated[Optional[int], typer.Option(
             "--tail", min=0, help="Only the last N lines of each task.")] = None):
    """Logs of every task of a TF cluster, each line prefixed with its task (init containers
    that failed, e.g. the code fetch, too). Exit 1 when the training failed, as `status`."""
    from tfhelm.cluster import spec, tasklogs
    from tfhelm.cluster.training import job_rows, training_state
    from tfhelm.errors import SpecError, TrainingFailed
    from tfhelm.kube import Kube

    ns = o.namespace_of(namespace)
    spec.validate_name(name, field="NAME")
    kube = Kube()
    kube.ping()
    if not tasklogs.tasks(kube, ns, name):
        raise SpecError("NAME", f"no task pods of TF cluster '{name}' in namespace {ns}",
                        "see `tfhelm list -n NAMESPACE`")

    def write(line: str) -> None:
        out.print(line, markup=False, highlight=False, soft_wrap=True)

    def note(line: str) -> None:
        err.print(f"[dim]{escape(line)}[/dim]", highlight=False, soft_wrap=True)

    try:
        if follow:
            tasklogs.follow(kube, ns, name, write, note, tail=tail)
        else:
            tasklogs.show(kube, ns, name, write, note, tail=tail)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if training_state(job_rows(kube.workloads(ns, name)[0])) == "Failed":
        raise typer.Exit(TrainingFailed.exit_code)
