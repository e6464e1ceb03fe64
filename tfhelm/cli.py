"""The `tfhelm` command line: the app, its global options and the registration of the
commands, each of which lives in tfhelm/commands/. Errors become one red line and an exit
code (tfhelm/console.py). Startup stays light: a command imports what it needs when it runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from tfhelm.commands import down, listing, logs, reap, render, run, status, tfconfig, up, user
from tfhelm.console import OneLineErrors, out

app = typer.Typer(help="Distributed TensorFlow on Kubernetes from a few parameters. Exit codes: "
                  "0 done, 1 training failed, 2 bad input, 3 no cluster or forbidden, 4 timed out, "
                  "5 the cluster or Helm refused.",
                  no_args_is_help=True, pretty_exceptions_enable=False, cls=OneLineErrors,
                  # Plain help, as helm's: rich's help renderer imports ~50 ms of modules
                  # (markdown, syntax, tracebacks) into every `--help`.
                  rich_markup_mode=None)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        from tfhelm.chart import chart_version

        out.print(f"tfhelm {version('tfhelm')} (charts: tf-cluster {chart_version('tf-cluster')}, "
                  f"user-env {chart_version('user-env')})", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _global(version: Annotated[bool, typer.Option(
                "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
            kubeconfig: Annotated[Optional[Path], typer.Option(
                "--kubeconfig", help="Kubeconfig file (default: KUBECONFIG, else ~/.kube/config).")] = None,
            kube_context: Annotated[Optional[str], typer.Option(
                "--kube-context", help="Kubeconfig context (default: its current one).")] = None):
    """Distributed TensorFlow on Kubernetes from a few parameters. Exit codes: 0 done, 1 training
    failed, 2 bad input, 3 no cluster or forbidden, 4 timed out, 5 the cluster or Helm refused."""
    # Through the environment, so Helm (a child process) and the API client agree.
    if kubeconfig:
        os.environ["KUBECONFIG"] = str(kubeconfig)
    if kube_context:
        from tfhelm.kubeconfig import CONTEXT_ENV

        os.environ[CONTEXT_ENV] = kube_context


# In the order `tfhelm --help` lists them (commands first, then the groups).
app.command("up")(up.up)
app.command("down")(down.down)
app.command("status")(status.status)
app.command("render")(render.render)
app.command("tfconfig")(tfconfig.tfconfig)
app.add_typer(user.app, name="user")
app.command("reap")(reap.reap)
app.command("run")(run.run)
app.command("list")(listing.list_)
app.command("logs")(logs.logs)
