"""`tfhelm user`: one workspace per user (Jupyter, TensorBoard, the code server) in a
namespace of its own. Thin commands over tfhelm.workspace: userspec (pure) and actions (cluster)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from tfhelm.console import cli_errors, err, line, note, out, printable, write

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
        quota_gpus: Annotated[Optional[int], typer.Option(
            "--quota-gpus", help="GPUs (nvidia.com/gpu) the namespace may request in all (default 0).")] = None,
        quota: Annotated[Optional[list[str]], typer.Option(
            "--quota", help="An object count, e.g. pods=100 or count/configmaps=50 (repeatable).")] = None,
        priority_class: Annotated[Optional[list[str]], typer.Option(
            "--priority-class", help="A PriorityClass the user's pods may name (repeatable); no "
            "other, and no system-* one, is admitted.")] = None,
        metrics_from: Annotated[Optional[list[str]], typer.Option(
            "--metrics-from", help="A namespace whose pods may scrape the TF tasks' metrics port, "
            "e.g. monitoring (repeatable).")] = None,
        max_cpu: Annotated[Optional[str], typer.Option(
            "--max-cpu", help="The most CPU one container may have (its limit), e.g. 8.")] = None,
        max_memory: Annotated[Optional[str], typer.Option(
            "--max-memory", help="The most memory one container may have, e.g. 32Gi.")] = None,
        queue: Annotated[Optional[bool], typer.Option(
            "--queue/--no-queue", help="Give the workspace its Kueue ClusterQueue (in the cohort "
            "`tfhelm`) and LocalQueue; by default where Kueue is installed.")] = None,
        queue_cpu: Annotated[Optional[str], typer.Option(
            "--queue-cpu", help="The workspace's nominal CPU in Kueue, e.g. 4 (its own share).")] = None,
        queue_memory: Annotated[Optional[str], typer.Option(
            "--queue-memory", help="The workspace's nominal memory in Kueue, e.g. 16Gi.")] = None,
        borrow_cpu: Annotated[Optional[str], typer.Option(
            "--borrow-cpu", help="At most this much more CPU, borrowed from the cohort's unused "
            "quota (default: no limit).")] = None,
        borrow_memory: Annotated[Optional[str], typer.Option(
            "--borrow-memory", help="At most this much more memory borrowed from the cohort.")] = None,
        queue_flavor: Annotated[Optional[str], typer.Option(
            "--queue-flavor", help="The Kueue ResourceFlavor of the quota (default: default-flavor).")] = None,
        priority: Annotated[Optional[list[str]], typer.Option(
            "--priority", help="A Kueue WorkloadPriorityClass the workspace may use (repeatable); "
            "none: only the default.")] = None,
        timeout: Annotated[float, typer.Option(
            "--timeout", help="Seconds to wait for the workspace to start; what is still starting "
            "then is reported and kept.")] = 600,
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Print the manifests; touch no cluster.")] = False):
    """Create (or update) a user's namespace, login token and workspace."""
    from tfhelm.api import users
    from tfhelm.cluster.values import wait_seconds
    from tfhelm.workspace import userspec

    opts = userspec.UserOptions(name, storage_class, quota_cpu, quota_memory, node_port,
                             tensorboard_node_port, quota_gpus, list(quota or []), list(priority_class or []),
                             list(metrics_from or []), max_cpu, max_memory, queue, queue_cpu, queue_memory,
                             borrow_cpu, borrow_memory, queue_flavor, list(priority or []))
    wait_seconds(timeout)
    if dry_run:
        write(users.render(opts))
        return
    users.add(opts, notify=note)
    ns = userspec.user_namespace(name)
    with err.status("waiting for the workspace to start") as spinner:
        waiting = users.wait_ready(name, timeout,
                                   lambda what: spinner.update(f"waiting for {escape(printable(what))}"))
    if waiting:
        still = escape(printable(", ".join(f"{c} ({r})" for c, r in sorted(waiting.items()))))
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
    from tfhelm.api import users

    u = users.urls(name)
    for label, value in (("notebook", u.notebook), ("tensorboard", u.tensorboard),
                         ("files", u.files and f"{u.files} (inside the cluster)")):
        if value:
            line(f"{label + ':':13}{value}")


@app.command("list")
@cli_errors
def list_():
    """Every user's namespace and the state of their workspace."""
    from rich.table import Table

    from tfhelm.api import users

    table = Table(title="tfhelm users")
    for col in ("USER", "NAMESPACE", "WORKSPACE"):
        table.add_column(col)
    for row in users.list_users():
        table.add_row(*map(printable, (row.user, row.namespace, row.state)))
    out.print(table)


@app.command()
@cli_errors
def remove(name: UserName,
           purge: Annotated[bool, typer.Option(
               "--purge", help="Also delete the namespace with the code, logs and data volumes "
               "and any TF clusters in it.")] = False):
    """Remove a user's workspace and revoke every account and grant in its namespace (the
    login token, ServiceAccounts and their tokens, Roles, RoleBindings); volumes stay unless
    --purge."""
    from tfhelm.api import users
    from tfhelm.errors import SpecError
    from tfhelm.workspace import userspec

    running = users.remove(name, purge=purge, notify=note)
    if running is None:
        raise SpecError("NAME", f"no user '{name}'", "see `tfhelm user list`")
    if purge:
        return
    ns = userspec.user_namespace(name)
    err.print(f"Kept in namespace {ns}: the code, logs and data volumes, and its NetworkPolicies, "
              "quota and LimitRange (whatever runs there stays isolated); no account there can act "
              "on it any more. `--purge` deletes it all.", highlight=False, soft_wrap=True)
    if running:
        err.print(f"[yellow]still running in {ns}:[/yellow] {escape(printable(', '.join(running)))} "
                  f"(`tfhelm down NAME -n {ns}` stops a TF cluster; its in-cluster reaper, if any, "
                  "was revoked too)", highlight=False, soft_wrap=True)
