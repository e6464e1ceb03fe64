"""`tfhelm logs NAME`: every task's log, prefixed by task; `-f` follows them all."""

from __future__ import annotations

from typing import Optional

import typer
from rich.markup import escape

from tfhelm import logs as core
from tfhelm import spec
from tfhelm.console import cli_errors, err, out
from tfhelm.errors import SpecError
from tfhelm.kube import Kube, namespace_or_current


@cli_errors
def logs(name: str = typer.Argument(..., help="Cluster name."),
         namespace: Optional[str] = typer.Option(None, "--namespace", "-n",
                                                 help="Namespace (default: the kubeconfig's)."),
         follow: bool = typer.Option(False, "--follow", "-f",
                                     help="Stream new lines, from every task, until all have ended."),
         tail: Optional[int] = typer.Option(None, "--tail", help="Only the last N lines of each task.")):
    """Logs of every task of a TF cluster, each line prefixed with its task."""
    ns = namespace_or_current(namespace)
    spec.validate_name(name, field="NAME")
    kube = Kube()
    kube.ping()
    if not core.tasks(kube, ns, name):
        raise SpecError("NAME", f"no task pods of TF cluster '{name}' in namespace {ns}",
                        "see `tfhelm list -n NAMESPACE`")

    def write(line: str) -> None:
        out.print(line, markup=False, highlight=False, soft_wrap=True)

    def note(line: str) -> None:
        err.print(f"[dim]{escape(line)}[/dim]", highlight=False, soft_wrap=True)

    try:
        if follow:
            core.follow(kube, ns, name, write, note, tail=tail)
        else:
            core.show(kube, ns, name, write, note, tail=tail)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
