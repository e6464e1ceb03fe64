"""`tfhelm cluster up|down|status`: the development cluster (tfhelm_dev.localcluster). It runs
from a checkout only, so the wheel has no such command: `make install` registers this group
with tfhelm (the entry point `tfhelm.commands: cluster`, hack/install-dev.py), and the CLI adds
the groups other packages register (tfhelm/console.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from tfhelm.console import cli_errors, err, out
from tfhelm.errors import NO_CLUSTER

app = typer.Typer(help="The local Kubernetes (real control plane, real nodes, kwok nodes) for tests and demos.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)  # plain, as tfhelm's


@app.command()
@cli_errors
def up(nodes: Annotated[int, typer.Option(
           "--nodes", help="Simulated (kwok) nodes, one of them the tainted user node.")] = 3,
       real_nodes: Annotated[int, typer.Option(
           "--real-nodes", help="Real nodes (kubelet, containerd: pods really run): 3 = the user node and "
                                "two training nodes, 2 = one training node, 1 = one node for everything, "
                                "0 = kwok only.")] = 3,
       kueue: Annotated[bool, typer.Option(
           "--kueue", help="Also run Kueue (`make kueue`): a ResourceFlavor `default-flavor` and a "
                           "ClusterQueue `training` over the training nodes; `cluster down` stops it.")] = False):
    """Start the local cluster (idempotent) and print the KUBECONFIG export line."""
    from tfhelm_dev import localcluster

    what = "etcd, kube-apiserver, controller-manager, scheduler, kwok" + (
        f" and {real_nodes} real node{'s' if real_nodes > 1 else ''} (kubelet, containerd, CoreDNS, kube-proxy)"
        if real_nodes else "")
    with err.status(f"starting {what}…"):
        info = localcluster.up(nodes, real_nodes)
    err.print(f"[green]✓[/green] local cluster at {info.server} with nodes: {', '.join(info.nodes)}")
    if kueue:
        from tfhelm_dev import localkueue

        with err.status("starting Kueue…"):
            localkueue.start()
        err.print(f"[green]✓[/green] Kueue: ClusterQueue {localkueue.CLUSTER_QUEUE} over the training nodes "
                  f"(ResourceFlavor {localkueue.FLAVOR}); make a LocalQueue in your namespace that points to it")
    out.print(info.export_line, markup=False, highlight=False, soft_wrap=True)


@app.command()
@cli_errors
def down():
    """Stop the local cluster; no process or port stays behind."""
    from tfhelm_dev import localcluster

    localcluster.down()
    err.print("[green]✓[/green] local cluster stopped")


@app.command()
@cli_errors
def status():
    """Show the local cluster; exit code 3 (no cluster) when it is not running."""
    from tfhelm_dev import localcluster

    info = localcluster.status()
    if info is None:
        err.print("local cluster: not running (start it with `tfhelm cluster up`)")
        raise typer.Exit(NO_CLUSTER)
    err.print(f"local cluster at {info.server} with nodes: {', '.join(info.nodes)}")
    out.print(info.export_line, markup=False, highlight=False, soft_wrap=True)

