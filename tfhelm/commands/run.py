"""`tfhelm run --local`: the cluster's topology as processes on this machine.

Registered by tfhelm/cli.py as `app.command("run")(run)`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from tfhelm.cluster.options import FINISH_GRACE
from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err
from tfhelm.errors import SpecError


def default_name(script: Path) -> str:
    """`examples/ps_in_graph.py` -> `ps-in-graph`: one run directory per script."""
    from tfhelm.cluster import spec

    name = re.sub(r"[^a-z0-9-]+", "-", script.stem.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = "run-" + name
    return name[: spec.MAX_NAME].rstrip("-")


@cli_errors
@o.cluster_flags("workers", "ps", "chief", "evaluator", "in_graph", "script_args",
                 workers=1, ps=0, chief=False, evaluator=False, in_graph=False)
def run(
    script: Annotated[Path, typer.Argument(
        help="The training script (runs unchanged on the cluster).", show_default=False)],
    local: Annotated[bool, typer.Option("--local", help="Run the tasks as processes on this machine.")] = False,
    flags: o.ClusterFlags = None,
    name: Annotated[Optional[str], typer.Option(
        "--name", help="Cluster name (default: from the script's file name).")] = None,
    directory: Annotated[Optional[Path], typer.Option(
        "--dir", help="Run directory with data/ and log/ (default: ./.tfhelm/run/NAME).")] = None,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Delete the run's logs and checkpoints first (no resume).")] = False,
    finish_grace: Annotated[float, typer.Option(
        "--finish-grace", help="Seconds other script tasks get to finish once training is done, "
        "before SIGTERM (not `tfhelm reap --grace`, the wait before PS removal).")] = FINISH_GRACE,
):
    """Run a training script on the cluster topology, locally: one process per TF task.

    Every task gets the TF_CONFIG the chart would give it, with hosts mapped to free ports on 127.0.0.1. PS (and in-graph workers) are stopped once training is done; the exit status is the training's. Ctrl-C stops every process it started.
    """
    from tfhelm.cluster import localrun, spec

    if not local:
        raise SpecError("--local", "only local runs are supported by `tfhelm run`",
                        "add --local, or use `tfhelm up --script ...` to run on Kubernetes")
    if not script.is_file():
        raise SpecError("SCRIPT", f"{script} is not a file")
    workers, ps, chief, evaluator = (flags[k] for k in ("workers", "ps", "chief", "evaluator"))
    shape = spec.Shape(workers=workers, ps=ps, chief=chief, evaluator=evaluator)
    cluster_name = spec.validate_name(name or default_name(script))
    tasks = localrun.plan(shape, cluster_name, flags["in_graph"])
    root = directory or localrun.default_root(cluster_name)
    if fresh and (root / "log").exists():
        shutil.rmtree(root / "log")
    err.print(f"[dim]•[/dim] local TF cluster [bold]{cluster_name}[/bold]: {workers} worker(s), "
              f"{ps} PS{', chief' if chief else ''}{', evaluator' if evaluator else ''}, "
              f"{'in-graph' if flags['in_graph'] else 'between-graph'}; files in {escape(str(root))}",
              highlight=False, soft_wrap=True)
    result = localrun.run(tasks, str(script), flags.get("script_args", []),
                          localrun.RunDirs(root), grace=finish_grace)
    if result.interrupted:
        err.print("[yellow]interrupted:[/yellow] every task stopped", highlight=False, soft_wrap=True)
    elif result.exit_code == 0:
        err.print(f"[green]✓[/green] training finished; TensorBoard: "
                  f"tensorboard --logdir {escape(str(root / 'log'))}", highlight=False,
                  soft_wrap=True)
    else:
        failed = ", ".join(result.failed) or "a task"
        err.print(f"[red]training failed:[/red] {failed} (exit status {result.exit_code})",
                  highlight=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)
