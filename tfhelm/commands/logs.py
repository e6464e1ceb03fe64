"""`tfhelm logs NAME`: every task's log, prefixed by task; `-f` follows them all."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err, out, printable


@cli_errors
def logs(name: o.ClusterName, namespace: o.Namespace = None,
         follow: Annotated[bool, typer.Option(
             "--follow", "-f", help="Stream new lines, from every task, until all have ended.")] = False,
         tail: Annotated[Optional[int], typer.Option(
             "--tail", min=0, help="Only the last N lines of each task.")] = None):
    """Logs of every task of a TF cluster, each line prefixed with its task (init containers
    that failed, e.g. the code fetch, too). Exit 1 when the training failed, as `status`."""
    from tfhelm.api import clusters
    from tfhelm.errors import TrainingFailed

    cluster = clusters.Cluster(name, namespace)

    def write(text: str) -> None:  # a script's output is anyone's: shown, never acted on
        out.print(printable(text), markup=False, highlight=False, soft_wrap=True)

    def note(text: str) -> None:
        err.print(f"[dim]{escape(printable(text))}[/dim]", highlight=False, soft_wrap=True)

    try:
        cluster.stream_logs(write, note, follow=follow, tail=tail)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if cluster.training() == "Failed":
        raise typer.Exit(TrainingFailed.exit_code)
