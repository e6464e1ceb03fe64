"""The `tfhelm` command line: thin commands over the pure core (spec, values) and the
side-effect layer (deploy, helm, kube). Errors become one red line and an exit code."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from tfhelm import deploy, manifests, spec, status, users
from tfhelm.console import cli_errors, err, out
from tfhelm.errors import SpecError, TfhelmError
from tfhelm.helm import Helm, run_sync
from tfhelm.kube import Kube, current_namespace
from tfhelm.values import ClusterOptions, generate_name, shape_of

app = typer.Typer(help="Distributed TensorFlow on Kubernetes from a few parameters.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
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
SetOpt = typer.Option(None, "--set", help="Set a chart value, e.g. worker.backoffLimitPerIndex=1 (repeatable).")
ArgsArg = typer.Argument(None, help="Arguments for the script, after `--`.", show_default=False)


def _options(name, namespace, workers, ps, chief, evaluator, in_graph, image, script, gpus,
             values_files, sets, script_args, user=None) -> ClusterOptions:
    files = [_load_values(f) for f in values_files or []]
    if user:  # the user's namespace, volumes and file server; -f and --set still override
        user_ns = users.user_namespace(user)
        if namespace and namespace != user_ns:
            raise SpecError("--namespace", f"user {user}'s clusters run in {user_ns}", "drop --namespace")
        if name == users.RELEASE:
            raise SpecError("--name", f"'{name}' is the user's workspace release", "choose another name")
        files.insert(0, users.cluster_values_for_user(user, script))
        namespace, script = user_ns, None
    return ClusterOptions(
        name=name, namespace=namespace or current_namespace(), workers=workers, ps=ps,
        chief=chief, evaluator=evaluator, in_graph=in_graph, image=image, script=script,
        gpus=gpus, value_files=files, sets=list(sets or []), script_args=list(script_args or []))


def _load_values(path: Path) -> dict:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SpecError("--values", f"cannot read {path}: {e}") from e
    if doc is not None and not isinstance(doc, dict):
        raise SpecError("--values", f"{path} is not a YAML mapping of chart values")
    return doc or {}


@app.command()
@cli_errors
def up(name: Optional[str] = typer.Option(None, "--name", help="Cluster name (default: generated)."),
       namespace: Optional[str] = NamespaceOpt, workers: Optional[int] = WorkersOpt,
       ps: Optional[int] = PsOpt, chief: Optional[bool] = ChiefOpt, evaluator: Optional[bool] = EvalOpt,
       in_graph: Optional[bool] = InGraphOpt, image: Optional[str] = ImageOpt,
       script: Optional[str] = ScriptOpt, gpus: Optional[int] = GpusOpt,
       user: Optional[str] = UserOpt,
       values_files: Optional[list[Path]] = ValuesOpt, sets: Optional[list[str]] = SetOpt,
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
                    image, script, gpus, values_files, sets, script_args, user)
    p = deploy.plan(opts)
    helm = Helm()
    if dry_run:
        out.print(deploy.manifests_yaml(run_sync(deploy.render(p, helm))), end="", markup=False,
                  highlight=False, soft_wrap=True)
        return
    kube = Kube()
    change = run_sync(deploy.up(p, helm, kube, notify=lambda m: err.print(f"[dim]•[/dim] {escape(m)}"),
                                replace=replace))
    s = p.shape
    err.print(f"[green]✓[/green] TF cluster [bold]{p.namespace}/{p.name}[/bold]: {s.workers} worker(s), "
              f"{s.ps} PS{', chief' if s.chief else ''}{', evaluator' if s.evaluator else ''}"
              f"{' (generated name)' if generated else ''}")
    err.print(f"  follow it:  tfhelm status {p.name} -n {p.namespace}\n"
              f"  logs:       kubectl -n {p.namespace} logs -f job/{change.new_jobs.get('worker')}\n"
              f"  remove it:  tfhelm down {p.name} -n {p.namespace}")
    if wait:
        from tfhelm.progress import wait_for_training

        outcome = wait_for_training(kube, p.namespace, p.name, s, err, timeout=timeout)
        colour = "green" if outcome == "Complete" else "red"
        err.print(f"[{colour}]training {outcome.lower()}[/{colour}]")
        if outcome != "Complete" and not reap:
            raise typer.Exit(1)
    if reap and s.ps:
        from tfhelm.commands.reap import run_reaper, summarize
        from tfhelm.reaper import config_from_values

        result = run_reaper(kube, p.namespace, p.name, config_from_values(p.values), err, helm=helm)
        if summarize(result, p.namespace, err):
            raise typer.Exit(1)


@app.command()
@cli_errors
def down(name: str = typer.Argument(..., help="Cluster name."), namespace: Optional[str] = NamespaceOpt,
         purge: bool = typer.Option(False, "--purge", help="Also delete the data and logs PVCs.")):
    """Uninstall a TF cluster (both releases). Data, logs and checkpoints stay unless --purge."""
    ns = namespace or current_namespace()
    spec.validate_name(name, field="NAME")
    found = run_sync(deploy.down(name, ns, Helm(), Kube(), purge=purge,
                                 notify=lambda m: err.print(f"[dim]•[/dim] {m}")))
    if not found:
        raise SpecError("NAME", f"no TF cluster '{name}' in namespace {ns}", "see `helm list -n NAMESPACE`")
    if not purge:
        err.print("PVCs (data, logs, checkpoints) were kept; `--purge` deletes them.")


@app.command("status")
@cli_errors
def status_(name: str = typer.Argument(..., help="Cluster name."),
            namespace: Optional[str] = NamespaceOpt):
    """Tasks, Job progress and parameter-server state of a TF cluster."""
    ns = namespace or current_namespace()
    spec.validate_name(name, field="NAME")
    installed = run_sync(deploy.find(name, ns, Helm()))
    kube = Kube()
    objs = kube.objects(ns, name)
    if not (objs.pods or objs.jobs or objs.deployments or installed.ps or installed.workload):
        raise TfhelmError(f"no TF cluster '{name}' in namespace {ns}")
    if installed.interrupted:
        err.print(f"[yellow]{escape(installed.interrupted_line())}[/yellow]", highlight=False, soft_wrap=True)
    table = Table(title=f"TF cluster {ns}/{name}")
    for col in ("TASK", "POD", "PHASE", "RESTARTS", "NODE"):
        table.add_column(col)
    for r in status.task_rows(objs):
        table.add_row(r.task, r.pod, r.phase, str(r.restarts), r.node)
    out.print(table)
    for j in status.job_rows(objs):
        out.print(f"job {j.name}: {j.succeeded}/{j.total} succeeded, {j.failed} failed — {j.state}")
    out.print(f"parameter servers: {status.ps_state(objs)}")
    from tfhelm.reaper import cluster_events

    for line in status.reaper_lines(cluster_events(kube, ns, objs.jobs)):
        out.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command()
@cli_errors
def render(name: str = typer.Argument(..., help="Cluster name."),
           namespace: Optional[str] = NamespaceOpt, workers: Optional[int] = WorkersOpt,
           ps: Optional[int] = PsOpt, chief: Optional[bool] = ChiefOpt,
           evaluator: Optional[bool] = EvalOpt, in_graph: Optional[bool] = InGraphOpt,
           image: Optional[str] = ImageOpt, script: Optional[str] = ScriptOpt,
           gpus: Optional[int] = GpusOpt, user: Optional[str] = UserOpt,
           values_files: Optional[list[Path]] = ValuesOpt, sets: Optional[list[str]] = SetOpt,
           values_only: bool = typer.Option(False, "--values-only",
                                            help="Print each release's values (for GitOps) instead."),
           script_args: Optional[list[str]] = ArgsArg):
    """Print the manifests of a TF cluster (or its values) without touching a cluster."""
    opts = _options(name, namespace, workers, ps, chief, evaluator, in_graph, image, script, gpus,
                    values_files, sets, script_args, user)
    p = deploy.plan(opts)
    if values_only:
        text = "".join(f"---\n# release: {r.name} (namespace {p.namespace})\n"
                       + yaml.safe_dump(r.values, sort_keys=False) for r in p.releases)
    else:
        text = deploy.manifests_yaml(run_sync(deploy.render(p, Helm())))
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
             sets: Optional[list[str]] = SetOpt):
    """The exact TF_CONFIG a task gets (offline with shape options, else from the release)."""
    if (task is None) == (client is None):
        raise SpecError("--task", "give either --task TYPE:INDEX or --client HOST:PORT")
    role, index = spec.parse_task(task) if task else ("chief", 0)
    ns = namespace or current_namespace()
    # The hosts come from the chart itself (rendered, or the installed release's manifest).
    if any(x is not None for x in (workers, ps, chief, evaluator)) or values_files or sets:
        values = deploy.plan(_options(name, ns, workers, ps, chief, evaluator, None, None, None,
                                      None, values_files, sets, None)).values
        cluster, _ = manifests.cluster_config(manifests.render(values, name, ns))
    else:
        cluster, values = run_sync(deploy.cluster_config(name, ns, Helm()))
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


def main() -> None:  # pragma: no cover - console entry point
    app(prog_name="tfhelm")


if __name__ == "__main__":
    sys.exit(main())
