"""`tfhelm reap NAME`: wait until a cluster's training is done, then remove its parameter
servers (the in-cluster reaper runs this same command with `--forever`). Thin: the
decisions are tfhelm.reaper's; this module only reads options and prints."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err

if TYPE_CHECKING:
    from rich.console import Console

    from tfhelm.kube import Kube
    from tfhelm.reaper import ReapConfig, Result


def run_reaper(kube: Kube, namespace: str, name: str | None, config: ReapConfig, console: Console,
               *, forever: bool = False, helm=None) -> Result | None:
    """Reap one cluster (or, with name None, every cluster of the namespace, forever).
    Decisions are printed as lines; the wait shows as a spinner on a terminal."""
    from tfhelm.reaper import KubeReapClient, Reaper

    kube.ping()
    client = KubeReapClient(kube, helm)
    interactive = console.is_terminal

    def line(text: str) -> None:
        stamp = datetime.now().strftime("%H:%M:%S")
        console.print(f"[dim]{stamp}[/dim] {escape(text)}", highlight=False, soft_wrap=True)

    if not interactive:
        return Reaper(client, namespace, name, config, forever=forever, log_line=line).run()
    with console.status(f"watching {namespace}/{name or '*'}") as spinner:
        def on_status(cluster: str, text: str) -> None:
            spinner.update(escape(f"{namespace}/{cluster}: {text}"))
        return Reaper(client, namespace, name, config, forever=forever, log_line=line,
                      on_status=on_status).run()


def summarize(result: Result, namespace: str, console: Console) -> int:
    """The closing line; returns the exit code (1 when training failed)."""
    from tfhelm.reaper import KEEP

    where = f"{namespace}/{result.cluster}"
    if result.action == KEEP:
        console.print(f"[yellow]kept[/yellow] {escape(where)}: {escape(result.message)}",
                      highlight=False, soft_wrap=True)
    else:
        colour = "green" if result.outcome == "Complete" else "yellow"
        console.print(f"[{colour}]✓[/{colour}] reaped {escape(where)}: "
                      f"{escape('; '.join(result.removed) or 'parameter servers already gone')}"
                      + ("" if result.outcome == "Complete" else " (training failed)"),
                      highlight=False, soft_wrap=True)
    return 0 if result.outcome == "Complete" else 1


def _remove_interrupted(name: str, namespace: str) -> bool:
    """A release NAME-ps from another chart is refused (exit 2); an interrupted install (a PS
    release without workload release or Jobs: nothing trains) is removed at once."""
    from tfhelm import deploy, spec
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube

    helm = Helm()
    found = deploy.find(name, namespace, helm)
    if found.interrupted and deploy.remove_interrupted(name, namespace, helm, Kube()):
        err.print(f"[green]✓[/green] reaped {escape(f'{namespace}/{name}')}: interrupted install, "
                  f"uninstalled release {escape(spec.ps_release(name))} (no workload release, no Jobs)",
                  highlight=False, soft_wrap=True)
        return True
    return False


@cli_errors
def reap(name: Annotated[Optional[str], typer.Argument(
             help="Cluster name (or --all).", show_default=False)] = None,
         namespace: o.Namespace = None,
         grace: Annotated[int, typer.Option(
             "--grace", help="Seconds between training done and PS removal.")] = 30,
         completion: Annotated[str, typer.Option(
             "--completion", help="When training is done: auto (the chief if there is one, else "
             "all workers), all-workers, chief, worker-0.")] = "auto",
         on_failure: Annotated[str, typer.Option(
             "--on-failure", help="If training failed: keep the PS for debugging, or reap.")] = "keep",
         all_clusters: Annotated[bool, typer.Option(
             "--all", help="Every cluster in the namespace, with one watch; runs until stopped.")] = False,
         forever: Annotated[bool, typer.Option(
             "--forever", help="Keep watching after the reap (re-runs are reaped too).")] = False,
         delete_directly: Annotated[bool, typer.Option(
             "--delete-directly",
             help="Delete the PS Deployments and Services by name and never run Helm (the "
                  "in-cluster reaper: no access to Secrets; the NAME-ps release record stays).")] = False):
    """Remove a cluster's parameter servers once training is done; PVCs and Jobs stay.

    Exit code 1 when training failed (the PS are kept unless --on-failure reap)."""
    from tfhelm import spec
    from tfhelm.errors import TRAINING_FAILED, SpecError
    from tfhelm.kube import Kube
    from tfhelm.reaper import ReapConfig

    if bool(name) == all_clusters:
        raise SpecError("NAME", "give a cluster name or --all, not both" if name
                        else "missing cluster name", "e.g. tfhelm reap mnist -n team-a")
    if name:
        spec.validate_name(name, field="NAME")
    config = ReapConfig(grace, completion, on_failure, delete_directly).validate()
    ns = o.namespace_of(namespace)
    if name and not (forever or delete_directly) and _remove_interrupted(name, ns):
        return
    try:
        result = run_reaper(Kube(), ns, name, config, err, forever=forever or all_clusters)
    except KeyboardInterrupt:  # the PS stay; running `tfhelm reap` again picks up from here
        err.print("interrupted: nothing was removed that was not reported above")
        sys.exit(130)
    if result is not None and summarize(result, ns, err):
        raise typer.Exit(TRAINING_FAILED)
