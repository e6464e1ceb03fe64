"""`tfhelm up`: create or upgrade a TF cluster (both releases); optionally wait and reap."""

from __future__ import annotations

import contextlib
import importlib
import signal
import threading
from typing import Annotated, Optional

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err, note, write


@cli_errors
def up(name: Annotated[Optional[str], typer.Option(
           "--name", help="Cluster name (default: generated).")] = None,
       namespace: o.Namespace = None, workers: o.Workers = None, ps: o.Ps = None,
       chief: o.Chief = None, evaluator: o.Evaluator = None, in_graph: o.InGraph = None,
       image: o.Image = None, script: o.Script = None, gpus: o.Gpus = None, user: o.User = None,
       keras: o.Keras = None, pip: o.Pip = None, pip_index_url: o.PipIndexUrl = None,
       pip_find_links: o.PipFindLinks = None, values_files: o.ValuesFiles = None, sets: o.Sets = None, set_strings: o.SetStrings = None,
       set_jsons: o.SetJsons = None,
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
       script_args: o.ScriptArgs = None):
    """Create (or upgrade) a TF cluster: the PS release and the main release.

    On an existing cluster it shows what changes and applies nothing the API server would
    refuse (server-side dry run first)."""
    # The API client's import (~0.2 s of CPU) goes on while Helm merges --set and renders.
    threading.Thread(target=importlib.import_module, args=("tfhelm.kube",), name="tfhelm-import").start()
    from tfhelm.cluster import deploy
    from tfhelm.cluster.values import generate_name
    from tfhelm.helm import Helm

    generated = name is None
    p = deploy.plan(o.cluster_options(
        name=name or generate_name(), namespace=namespace, workers=workers, ps=ps, chief=chief,
        evaluator=evaluator, in_graph=in_graph, image=image, script=script, gpus=gpus, user=user,
        keras=keras, pip=pip, pip_index_url=pip_index_url, pip_find_links=pip_find_links,
        values_files=values_files, sets=sets, set_strings=set_strings, set_jsons=set_jsons,
        script_args=script_args))
    helm = Helm()
    rendering = deploy.Rendering(p, helm)
    if dry_run:
        write(deploy.manifests_yaml(rendering.result(), rendering.code))
        return
    from tfhelm.kube import Kube

    kube = Kube()
    if user:
        from tfhelm.workspace.actions import require_workspace

        kube.ping()
        require_workspace(user, kube)
    with _sigterm_as_interrupt():  # SIGTERM reports what is left, as Ctrl-C does
        try:
            deploy.up(p, helm, kube, notify=note, replace=replace, rendering=rendering)
        except KeyboardInterrupt:
            err.print(f"[yellow]interrupted[/yellow] while installing {p.namespace}/{p.name}: `tfhelm "
                      f"up` again finishes it, `tfhelm down {p.name} -n {p.namespace}` removes it",
                      highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None
        try:
            _follow(p, helm, kube, generated, wait, timeout, reap)
        except KeyboardInterrupt:
            _left_behind(kube, p)
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


def _left_behind(kube, p) -> None:
    """After Ctrl-C or SIGTERM: what still runs, and the command that reaps it."""
    from tfhelm.cluster import report, training

    try:
        jobs, deployments = kube.workloads(p.namespace, p.name)
        ps, ready = report.ps_counts(deployments)
        left = (f"training {training.training_state(training.job_rows(jobs)).lower()}, "
                + (f"{ps} parameter server(s) ({ready} ready), which run until reaped" if ps
                   else "no parameter servers"))
    except Exception:  # noqa: BLE001 - the API server may be why we were stopped
        left = "its state could not be read"
    err.print(f"[yellow]interrupted:[/yellow] {p.namespace}/{p.name} is left as it is: {left}. "
              f"Reap it when done: tfhelm reap {p.name} -n {p.namespace} (or remove it now: "
              f"tfhelm down {p.name} -n {p.namespace})", highlight=False, soft_wrap=True)


def _follow(p, helm, kube, generated: bool, wait: bool, timeout: int, reap: bool) -> None:
    """After the install: the summary, then `--wait` and `--reap`."""
    from tfhelm.errors import TrainingFailed

    s = p.shape
    err.print(f"[green]✓[/green] TF cluster [bold]{p.namespace}/{p.name}[/bold]: {s.workers} worker(s), "
              f"{s.ps} PS{', chief' if s.chief else ''}{', evaluator' if s.evaluator else ''}"
              f"{' (generated name)' if generated else ''}")
    err.print(f"  follow it:  tfhelm status {p.name} -n {p.namespace}\n"
              f"  logs:       tfhelm logs {p.name} -n {p.namespace} -f\n"
              f"  remove it:  tfhelm down {p.name} -n {p.namespace}")
    if wait:
        from tfhelm.cluster.progress import wait_for_training

        outcome, simulated = wait_for_training(kube, p.namespace, p.name, s, err, timeout=timeout)
        colour = "green" if outcome == "Complete" else "red"
        if simulated:  # kwok decided the pods' fate: say so, never claim a training
            err.print(f"[{colour}]Jobs {outcome.lower()} on simulated (kwok) nodes: no container ran, "
                      f"nothing was trained[/{colour}]")
        else:
            err.print(f"[{colour}]training {outcome.lower()}[/{colour}]")
            if outcome != "Complete":  # the tasks' own error lines: one read of the pods
                from tfhelm.cluster import report

                for line in report.error_lines(report.task_rows(kube.task_pods(p.namespace, p.name))):
                    err.print(line, markup=False, highlight=False, soft_wrap=True)
        if outcome != "Complete" and not reap:
            raise typer.Exit(TrainingFailed.exit_code)
    if reap and s.ps:
        from tfhelm.reaper import ReapConfig
        from tfhelm.reaper.console import run_reaper, summarize

        result = run_reaper(kube, p.namespace, p.name, ReapConfig.of(p.cluster), err, helm=helm)
        if summarize(result, p.namespace, err):
            raise typer.Exit(TrainingFailed.exit_code)
