"""The `tfhelm` command line: thin commands over the pure core (spec, values) and the
side-effect layer (deploy, helm, kube). Errors become one red line and an exit code."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from tfhelm import deploy, gitops, manifests, spec, status, training, users, uservalues
from tfhelm.console import OneLineErrors, cli_errors, err, out
from tfhelm.errors import SpecError, TrainingFailed
from tfhelm.helm import Helm
from tfhelm.kube import CONTEXT_ENV, Kube, namespace_or_current
from tfhelm.output import OutputOpt, check_format, emit, table
from tfhelm.values import ClusterOptions, generate_name, shape_of

app = typer.Typer(help="Distributed TensorFlow on Kubernetes from a few parameters. Exit codes: "
                  "0 done, 1 training failed, 2 bad input, 3 no cluster or forbidden, 4 timed out, "
                  "5 the cluster or Helm refused.",
                  no_args_is_help=True, pretty_exceptions_enable=False, cls=OneLineErrors)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        from tfhelm.chart import chart_version

        out.print(f"tfhelm {version('tfhelm')} (charts: tf-cluster {chart_version('tf-cluster')}, "
                  f"user-env {chart_version('user-env')})", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _global(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                         help="Print the version and exit."),
            kubeconfig: Optional[Path] = typer.Option(
                None, "--kubeconfig", help="Kubeconfig file (default: KUBECONFIG, else ~/.kube/config)."),
            kube_context: Optional[str] = typer.Option(
                None, "--kube-context", help="Kubeconfig context (default: its current one).")):
    """Distributed TensorFlow on Kubernetes from a few parameters. Exit codes: 0 done, 1 training
    failed, 2 bad input, 3 no cluster or forbidden, 4 timed out, 5 the cluster or Helm refused."""
    # Through the environment, so Helm (a child process) and the API client agree.
    if kubeconfig:
        os.environ["KUBECONFIG"] = str(kubeconfig)
    if kube_context:
        os.environ[CONTEXT_ENV] = kube_context


# Options shared by the commands that compute a cluster's values.
NamespaceOpt = typer.Option(None, "--namespace", "-n", help="Namespace (default: the kubeconfig's).")
WorkersOpt = typer.Option(None, "--workers", "-w", help="Worker tasks (an Indexed Job).")
PsOpt = typer.Option(None, "--ps", help="Parameter server tasks (a Deployment + Service each).")
ChiefOpt = typer.Option(None, "--chief/--no-chief", help="Add a chief that drives the cluster.")
EvalOpt = typer.Option(None, "--evaluator/--no-evaluator", help="Add an evaluator task.")
InGraphOpt = typer.Option(None, "--in-graph/--between-graph",
                          help="in-graph: the chief runs the script, workers and PS only serve.")
ImageOpt = typer.Option(None, "--image", help="Image of every task, e.g. tensorflow/tensorflow:2.21.0.")
ScriptOpt = typer.Option(None, "--script",
                         help="http(s) URL of the script, a local file, or an absolute path in the image.")
GpusOpt = typer.Option(None, "--gpus", help="GPUs per worker (nvidia.com/gpu).")
UserOpt = typer.Option(None, "--user", help="Run in this user's workspace (tfhelm user add): their "
                       "namespace and volumes; a relative --script is a file on their code volume.")
ValuesOpt = typer.Option(None, "--values", "-f", help="Values file (repeatable).")
SetOpt = typer.Option(None, "--set", help="Set a chart value, e.g. worker.backoffLimitPerIndex=1 (repeatable; Helm's rules).")
SetStringOpt = typer.Option(None, "--set-string", help="Set a chart value as a string (repeatable).")
SetJsonOpt = typer.Option(None, "--set-json", help="Set a chart value to JSON, e.g. worker.env='[...]' (repeatable).")
ArgsArg = typer.Argument(None, help="Arguments for the script, after `--`.", show_default=False)


def _sets(sets, set_strings, set_jsons) -> uservalues.SetFlags:
    return uservalues.SetFlags(list(sets or []), list(set_strings or []), list(set_jsons or []))


def _options(name, namespace, workers, ps, chief, evaluator, in_graph, image, script, gpus,
             values_files, sets: uservalues.SetFlags, script_args, user=None) -> ClusterOptions:
    files = [uservalues.load_file(f) for f in values_files or []]
    if user:  # the user's namespace, volumes and file server; -f and --set still override
        user_ns = users.user_namespace(user)
        if namespace and namespace != user_ns:
            raise SpecError("--namespace", f"user {user}'s clusters run in {user_ns}", "drop --namespace")
        if name == users.RELEASE:
            raise SpecError("--name", f"'{name}' is the user's workspace release", "choose another name")
        files.insert(0, users.cluster_values_for_user(user, script))
        namespace, script = user_ns, None
    return ClusterOptions(
        name=name, namespace=namespace_or_current(namespace), workers=workers, ps=ps,
        chief=chief, evaluator=evaluator, in_graph=in_graph, image=image, script=script,
        gpus=gpus, value_files=[uservalues.merge(files, sets)], script_args=list(script_args or []))


@app.command()
@cli_errors
def up(name: Optional[str] = typer.Option(None, "--name", help="Cluster name (default: generated)."),
       namespace: Optional[str] = NamespaceOpt, workers: Optional[int] = WorkersOpt,
       ps: Optional[int] = PsOpt, chief: Optional[bool] = ChiefOpt, evaluator: Optional[bool] = EvalOpt,
       in_graph: Optional[bool] = InGraphOpt, image: Optional[str] = ImageOpt,
       script: Optional[str] = ScriptOpt, gpus: Optional[int] = GpusOpt,
       user: Optional[str] = UserOpt,
       values_files: Optional[list[Path]] = ValuesOpt, sets: Optional[list[str]] = SetOpt,
       set_strings: Optional[list[str]] = SetStringOpt, set_jsons: Optional[list[str]] = SetJsonOpt,
       wait: bool = typer.Option(False, "--wait", help="Wait until training finishes, showing progress."),
       timeout: int = typer.Option(3600, "--timeout", help="Seconds --wait waits."),
       reap: bool = typer.Option(False, "--reap", help="Wait until training is done, then remove the "
                                 "parameter servers (grace, completion, onFailure: the `reaper` values)."),
       dry_run: bool = typer.Option(False, "--dry-run", help="Print the manifests; touch no cluster."),
       replace: bool = typer.Option(False, "--replace", help="Let a change replace Jobs that ran or run "
                                    "(training restarts from its checkpoint); unchanged: a new run."),
       script_args: Optional[list[str]] = ArgsArg):
    """Create (or upgrade) a TF cluster: the PS release and the main release.

    On an existing cluster it shows what changes and applies nothing the API server would
    refuse (server-side dry run first)."""
    generated = name is None
    opts = _options(name or generate_name(), namespace, workers, ps, chief, evaluator, in_graph,
                    image, script, gpus, values_files, _sets(sets, set_strings, set_jsons),
                    script_args, user)
    p = deploy.plan(opts)
    helm = Helm()
    if dry_run:
        out.print(deploy.manifests_yaml(deploy.render(p, helm)), end="", markup=False,
                  highlight=False, soft_wrap=True)
        return
    kube = Kube()
    deploy.up(p, helm, kube, notify=lambda m: err.print(f"[dim]•[/dim] {escape(m)}"), replace=replace)
    s = p.shape
    err.print(f"[green]✓[/green] TF cluster [bold]{p.namespace}/{p.name}[/bold]: {s.workers} worker(s), "
              f"{s.ps} PS{', chief' if s.chief else ''}{', evaluator' if s.evaluator else ''}"
              f"{' (generated name)' if generated else ''}")
    err.print(f"  follow it:  tfhelm status {p.name} -n {p.namespace}\n"
              f"  logs:       tfhelm logs {p.name} -n {p.namespace} -f\n"
              f"  remove it:  tfhelm down {p.name} -n {p.namespace}")
    if wait:
        from tfhelm.progress import wait_for_training

        outcome, simulated = wait_for_training(kube, p.namespace, p.name, s, err, timeout=timeout)
        colour = "green" if outcome == "Complete" else "red"
        if simulated:  # kwok decided the pods' fate: say so, never claim a training
            err.print(f"[{colour}]Jobs {outcome.lower()} on simulated (kwok) nodes: no container ran, "
                      f"nothing was trained[/{colour}]")
        else:
            err.print(f"[{colour}]training {outcome.lower()}[/{colour}]")
        if outcome != "Complete" and not reap:
            raise typer.Exit(TrainingFailed.exit_code)
    if reap and s.ps:
        from tfhelm.commands.reap import run_reaper, summarize
        from tfhelm.reaper import config_from_values

        result = run_reaper(kube, p.namespace, p.name, config_from_values(p.values), err, helm=helm)
        if summarize(result, p.namespace, err):
            raise typer.Exit(TrainingFailed.exit_code)


@app.command()
@cli_errors
def down(name: str = typer.Argument(..., help="Cluster name."), namespace: Optional[str] = NamespaceOpt,
         purge: bool = typer.Option(False, "--purge", help="Also delete the data and logs PVCs.")):
    """Uninstall a TF cluster (both releases). Data, logs and checkpoints stay unless --purge."""
    ns = namespace_or_current(namespace)
    spec.validate_name(name, field="NAME")
    found = deploy.down(name, ns, Helm(), Kube(), purge=purge,
                        notify=lambda m: err.print(f"[dim]•[/dim] {escape(m)}"))
    if not found:
        raise SpecError("NAME", f"no TF cluster '{name}' in namespace {ns}", "see `tfhelm list -n NAMESPACE`")
    if not purge:
        err.print("PVCs (data, logs, checkpoints) were kept; `--purge` deletes them.")


@app.command("status")
@cli_errors
def status_(name: str = typer.Argument(..., help="Cluster name."),
            namespace: Optional[str] = NamespaceOpt, output: str = OutputOpt):
    """Tasks, Job progress and parameter-server state of a TF cluster (exit 1: training failed)."""
    fmt = check_format(output)
    ns = namespace_or_current(namespace)
    spec.validate_name(name, field="NAME")
    installed = deploy.find(name, ns, Helm())
    kube = Kube()
    objs = kube.objects(ns, name)
    if not (objs.pods or objs.jobs or objs.deployments or installed.ps or installed.workload):
        raise SpecError("NAME", f"no TF cluster '{name}' in namespace {ns}", "see `tfhelm list -n NAMESPACE`")
    if installed.interrupted:
        err.print(f"[yellow]{escape(installed.interrupted_line())}[/yellow]", highlight=False, soft_wrap=True)
    from tfhelm.reaper import cluster_events

    events = cluster_events(kube, ns, objs.jobs)
    if fmt != "table":
        emit(status.report(ns, name, objs, events), fmt)
    else:
        table(("TASK", "POD", "PHASE", "RESTARTS", "NODE"),
              [(r.task, r.pod, r.phase, r.restarts, r.node) for r in status.task_rows(objs)],
              title=f"TF cluster {ns}/{name}")
        for j in training.job_rows(objs.jobs):
            out.print(f"job {j.name}: {j.succeeded}/{j.total} succeeded, {j.failed} failed — {j.state}",
                      markup=False, highlight=False)
        out.print(f"parameter servers: {status.ps_state(objs)}", markup=False, highlight=False)
        for line in status.reaper_lines(events):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    # The same exit code whatever the format: a script reads it without parsing the report.
    if training.training_done(training.job_rows(objs.jobs)) == "Failed":
        raise typer.Exit(TrainingFailed.exit_code)


@app.command()
@cli_errors
def render(name: str = typer.Argument(..., help="Cluster name."),
           namespace: Optional[str] = NamespaceOpt, workers: Optional[int] = WorkersOpt,
           ps: Optional[int] = PsOpt, chief: Optional[bool] = ChiefOpt,
           evaluator: Optional[bool] = EvalOpt, in_graph: Optional[bool] = InGraphOpt,
           image: Optional[str] = ImageOpt, script: Optional[str] = ScriptOpt,
           gpus: Optional[int] = GpusOpt, user: Optional[str] = UserOpt,
           values_files: Optional[list[Path]] = ValuesOpt, sets: Optional[list[str]] = SetOpt,
           set_strings: Optional[list[str]] = SetStringOpt, set_jsons: Optional[list[str]] = SetJsonOpt,
           values_only: bool = typer.Option(
               False, "--values-only", help="Print each release's values for GitOps instead "
               "(with the in-cluster reaper on when there are parameter servers)."),
           one_release: bool = typer.Option(
               False, "--one-release", help="With --values-only: one release holding everything "
               "(components: all), e.g. for a Flux HelmRelease."),
           script_args: Optional[list[str]] = ArgsArg):
    """Print the manifests of a TF cluster (or its values) without touching a cluster."""
    if one_release and not values_only:
        raise SpecError("--one-release", "only goes with --values-only")
    opts = _options(name, namespace, workers, ps, chief, evaluator, in_graph, image, script, gpus,
                    values_files, _sets(sets, set_strings, set_jsons), script_args, user)
    p = deploy.plan(opts)
    if values_only:
        text = gitops.values_yaml(p, one=one_release)
    else:
        text = deploy.manifests_yaml(deploy.render(p, Helm()))
    out.print(text, end="", markup=False, highlight=False, soft_wrap=True)


@app.command()
@cli_errors
def tfconfig(name: str = typer.Argument(..., help="Cluster name."),
             task: Optional[str] = typer.Option(None, "--task", "-t", help="TYPE:INDEX, e.g. worker:3."),
             client: Optional[str] = typer.Option(
                 None, "--client", help="HOST:PORT of an outside chief (e.g. a notebook) that "
                 "drives an in-graph cluster: prints the chief's TF_CONFIG with that address."),
             namespace: Optional[str] = NamespaceOpt, workers: Optional[int] = WorkersOpt,
             ps: Optional[int] = PsOpt, chief: Optional[bool] = ChiefOpt,
             evaluator: Optional[bool] = EvalOpt, values_files: Optional[list[Path]] = ValuesOpt,
             sets: Optional[list[str]] = SetOpt, set_strings: Optional[list[str]] = SetStringOpt,
             set_jsons: Optional[list[str]] = SetJsonOpt):
    """The exact TF_CONFIG a task gets (offline with shape options, else from the release)."""
    if (task is None) == (client is None):
        raise SpecError("--task", "give either --task TYPE:INDEX or --client HOST:PORT")
    role, index = spec.parse_task(task) if task else ("chief", 0)
    ns = namespace_or_current(namespace)
    flags = _sets(sets, set_strings, set_jsons)
    # The hosts come from the chart itself (rendered, or the installed release's manifest).
    if any(x is not None for x in (workers, ps, chief, evaluator)) or values_files or flags:
        values = deploy.plan(_options(name, ns, workers, ps, chief, evaluator, None, None, None,
                                      None, values_files, flags, None)).values
        cluster, _ = manifests.cluster_config(manifests.render(values, name, ns))
    else:
        cluster, values = deploy.cluster_config(name, ns, Helm())
    if client:
        cluster = spec.with_client(cluster, client)
    else:
        spec.check_task(shape_of(values), role, index)
    out.print(spec.dumps(spec.tf_config(cluster, role, index)), markup=False, highlight=False,
              soft_wrap=True)


# Commands that live in their own modules (tfhelm/commands/), registered here.
# Each line: app.command(NAME)(function) or app.add_typer(sub_app, name=NAME).
from tfhelm.commands import user as user_cmd; app.add_typer(user_cmd.app, name="user")  # noqa: E402,E702
from tfhelm.commands import reap as reap_cmd; app.command("reap")(reap_cmd.reap)  # noqa: E402,E702
from tfhelm.commands import cluster as cluster_cmd; app.add_typer(cluster_cmd.app, name="cluster")  # noqa: E402,E702
from tfhelm.commands import run as run_cmd; app.command("run")(run_cmd.run)  # noqa: E402,E702
from tfhelm.commands import listing as list_cmd; app.command("list")(list_cmd.list_)  # noqa: E402,E702
from tfhelm.commands import logs as logs_cmd; app.command("logs")(logs_cmd.logs)  # noqa: E402,E702


def main() -> None:  # pragma: no cover - console entry point
    app(prog_name="tfhelm")


if __name__ == "__main__":
    sys.exit(main())
