"""`tfhelm up`: create or upgrade a TF cluster (both releases); optionally wait and reap."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Annotated, Optional

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err, line, note, write


@cli_errors
@o.cluster_flags()
def up(name: Annotated[Optional[str], typer.Option(
           "--name", help="Cluster name (default: generated).")] = None,
       flags: o.ClusterFlags = None,
       wait: Annotated[bool, typer.Option(
           "--wait", help="Wait until training finishes, showing progress.")] = False,
       timeout: Annotated[int, typer.Option("--timeout", help="Seconds --wait waits.")] = 3600,
       reap: Annotated[bool, typer.Option(
           "--reap", help="Wait until training is done, then remove the parameter servers "
           "(grace, completion, onFailure: the `reaper` values).")] = False,
       dry_run: Annotated[bool, typer.Option(
           "--dry-run", help="Print the manifests; touch no cluster.")] = False,
       replace: Annotated[bool, typer.Option(
           "--replace", help="Let a change replace Jobs that ran or run (training restarts from "
           "its checkpoint); unchanged: a new run.")] = False,
       force: Annotated[bool, typer.Option(
           "--force", help="Take over the cluster's install lock held by another `tfhelm up` "
           "(only when none runs: one that died, or a Lease written by hand).")] = False):
    """Create (or upgrade) a TF cluster: the PS release and the main release.

    On an existing cluster it shows what changes and applies nothing the API server would
    refuse (server-side dry run first)."""
    from tfhelm.api import clusters
    from tfhelm.cluster.values import wait_seconds

    wait_seconds(timeout)
    prepared = clusters.prepare(name, load_kube=not dry_run, **flags)
    if dry_run:
        write(prepared.manifests())
        return
    with _sigterm_as_interrupt():  # SIGTERM reports what is left, as Ctrl-C does
        try:
            cluster = prepared.install(replace=replace, notify=note, force=force)
        except KeyboardInterrupt:
            where = f"{prepared.namespace}/{prepared.name}"
            err.print(f"[yellow]interrupted[/yellow] while installing {where}: `tfhelm "
                      f"up` again finishes it, `tfhelm down {prepared.name} -n {prepared.namespace}` removes it",
                      highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None
        try:
            _follow(cluster, prepared.plan.shape, prepared.generated, wait, timeout, reap)
        except KeyboardInterrupt:
            _left_behind(cluster)
            raise typer.Exit(130) from None


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt meanwhile (signals reach the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _left_behind(cluster) -> None:
    """After Ctrl-C or SIGTERM: what still runs, and the command that reaps it."""
    name, ns = cluster.name, cluster.namespace
    try:
        left = cluster.left_behind()
    except Exception:  # noqa: BLE001 - the API server may be why we were stopped
        left = "its state could not be read"
    err.print(f"[yellow]interrupted:[/yellow] {ns}/{name} is left as it is: {left}. "
              f"Reap it when done: tfhelm reap {name} -n {ns} (or remove it now: "
              f"tfhelm down {name} -n {ns})", highlight=False, soft_wrap=True)


def _follow(cluster, s, generated: bool, wait: bool, timeout: int, reap: bool) -> None:
    """After the install: the summary, then `--wait` and `--reap`."""
    from tfhelm.errors import TrainingFailed

    name, ns = cluster.name, cluster.namespace
    q = cluster.queue_name()
    queued = f", queued in Kueue LocalQueue {q}" if q else ""
    err.print(f"[green]✓[/green] TF cluster [bold]{ns}/{name}[/bold]: {s.workers} worker(s), "
              f"{s.ps} PS{', chief' if s.chief else ''}{', evaluator' if s.evaluator else ''}"
              f"{' (generated name)' if generated else ''}{queued}")
    err.print(f"  follow it:  tfhelm status {name} -n {ns}\n"
              f"  logs:       tfhelm logs {name} -n {ns} -f\n"
              f"  remove it:  tfhelm down {name} -n {ns}")
    if wait:
        outcome = cluster.wait(timeout=timeout, progress=err, check=False)
        colour = "green" if outcome.training == "Complete" else "red"
        if outcome.simulated:  # kwok decided the pods' fate: say so, never claim a training
            err.print(f"[{colour}]Jobs {outcome.training.lower()} on simulated (kwok) nodes: no container ran, "
                      f"nothing was trained[/{colour}]")
        else:
            err.print(f"[{colour}]training {outcome.training.lower()}[/{colour}]")
            for text in outcome.errors:  # the tasks' own error lines
                line(text, err)
        if outcome.training != "Complete" and not reap:
            raise typer.Exit(TrainingFailed.exit_code)
    if reap and s.ps:
        from tfhelm.reaper.lines import summarize

        result = cluster.reap(console=err, check=False)
        if summarize(result, ns, err):
            raise typer.Exit(TrainingFailed.exit_code)
