"""`tfhelm user`: one workspace per user (Jupyter, TensorBoard, the code server) in a
namespace of its own. Thin commands over tfhelm.workspace: rules (pure) and actions (cluster)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from tfhelm.console import cli_errors, err, note, out, write

app = typer.Typer(help="Users' workspaces: Jupyter, TensorBoard and a code server, a namespace each.",
                  no_args_is_help=True)

UserName = Annotated[str, typer.Argument(help="User name; the workspace lives in namespace tfhelm-user-NAME.")]


@app.command()
@cli_errors
def add(name: UserName,
        storage_class: Annotated[Optional[str], typer.Option(
            "--storage-class", help="StorageClass of the code, logs and data volumes.")] = None,
        quota_cpu: Annotated[Optional[str], typer.Option(
            "--quota-cpu", help="CPU the namespace may request in all, e.g. 8.")] = None,
        quota_memory: Annotated[Optional[str], typer.Option(
            "--quota-memory", help="Memory the namespace may request in all, e.g. 32Gi.")] = None,
        node_port: Annotated[Optional[int], typer.Option("--node-port", help="Node port of the notebook.")] = None,
        tensorboard_node_port: Annotated[Optional[int], typer.Option(
            "--tensorboard-node-port", help="Node port of TensorBoard.")] = None,
        timeout: Annotated[float, typer.Option(
            "--timeout", help="Seconds to wait for the workspace to start; what is still starting "
            "then is reported and kept.")] = 600,
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Print the manifests; touch no cluster.")] = False):
    """Create (or update) a user's namespace, login token and workspace."""
    from tfhelm.cluster import deploy
    from tfhelm.helm import Helm
    from tfhelm.workspace import actions, rules

    opts = rules.UserOptions(name, storage_class, quota_cpu, quota_memory, node_port,
                             tensorboard_node_port)
    if dry_run:
        manifests = actions.render(opts, Helm())
        write(deploy.manifests_yaml({rules.RELEASE: manifests,
                                     f"{actions.POLICY} (cluster-wide, applied once)": rules.service_policy()}))
        return
    from tfhelm.kube import Kube

    kube = Kube()
    actions.add(opts, Helm(), kube, notify=note)
    ns = rules.user_namespace(name)
    with err.status("waiting for the workspace to start") as spinner:
        waiting = actions.wait_ready(name, kube, timeout,
                                     lambda what: spinner.update(f"waiting for {what}"))
    if waiting:
        still = ", ".join(f"{c} ({r})" for c, r in sorted(waiting.items()))
        err.print(f"[yellow]![/yellow] workspace of [bold]{name}[/bold] installed in {ns}, still starting "
                  f"after {timeout:.0f}s: {still}. Nothing was removed; check again with "
                  f"`kubectl get pods -n {ns}`.")
        raise typer.Exit(4)
    err.print(f"[green]✓[/green] workspace of [bold]{name}[/bold] in namespace {ns}")
    err.print(f"  URLs and login token:  tfhelm user url {name}\n"
              f"  train with it:         tfhelm up --user {name} --workers 2 --script train.py\n"
              f"  remove it:             tfhelm user remove {name}")


@app.command()
@cli_errors
def url(name: UserName):
    """Print the notebook URL with its login token, and the TensorBoard and file server URLs."""
    from tfhelm.kube import Kube
    from tfhelm.workspace import actions, rules

    u = actions.urls(rules.validate_user(name), Kube())
    for label, value in (("notebook", u.notebook), ("tensorboard", u.tensorboard),
                         ("files", u.files and f"{u.files} (inside the cluster)")):
        if value:
            out.print(f"{label + ':':13}{value}", markup=False, highlight=False, soft_wrap=True)


@app.command("list")
@cli_errors
def list_():
    """Every user's namespace and the state of their workspace."""
    from rich.table import Table

    from tfhelm.kube import Kube
    from tfhelm.workspace import actions

    table = Table(title="tfhelm users")
    for col in ("USER", "NAMESPACE", "WORKSPACE"):
        table.add_column(col)
    for row in actions.list_users(Kube()):
        table.add_row(row.user, row.namespace, row.state)
    out.print(table)


@app.command()
@cli_errors
def remove(name: UserName,
           purge: Annotated[bool, typer.Option(
               "--purge", help="Also delete the namespace with the code, logs and data volumes "
               "and any TF clusters in it.")] = False):
    """Remove a user's workspace and login token; volumes stay unless --purge."""
    from tfhelm.errors import SpecError
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube
    from tfhelm.workspace import actions, rules

    kube = Kube()
    found = actions.remove(rules.validate_user(name), Helm(), kube, purge=purge, notify=note)
    if not found:
        raise SpecError("NAME", f"no user '{name}'", "see `tfhelm user list`")
    if purge:
        return
    ns = rules.user_namespace(name)
    err.print(f"Kept in namespace {ns}: the code, logs and data volumes, and its NetworkPolicies, "
              "quota and LimitRange (whatever runs there stays isolated); `--purge` deletes it all.",
              highlight=False, soft_wrap=True)
    running = actions.still_running(name, kube)
    if running:
        err.print(f"[yellow]still running in {ns}:[/yellow] {escape(', '.join(running))} "
                  f"(`tfhelm down NAME -n {ns}` stops a TF cluster)", highlight=False, soft_wrap=True)
