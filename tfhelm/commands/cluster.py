"""`tfhelm cluster up|down|status`: the embedded local Kubernetes (tfhelm.localcluster)."""

from __future__ import annotations

import typer

from tfhelm import localcluster
from tfhelm.console import cli_errors, err, out

app = typer.Typer(help="The local Kubernetes (real control plane, a real node, kwok nodes) for tests and demos.",
                  no_args_is_help=True)


@app.command()
@cli_errors
def up(nodes: int = typer.Option(3, "--nodes", help="Simulated (kwok) nodes, one of them the tainted user node."),
       real_node: bool = typer.Option(True, "--real-node/--no-real-node",
                                      help="Also run a real node (kubelet, containerd): pods really run.")):
    """Start the local cluster (idempotent) and print the KUBECONFIG export line."""
    what = "etcd, kube-apiserver, controller-manager, scheduler, kwok" + (
        " and the real node (kubelet, containerd, CoreDNS, kube-proxy)" if real_node else "")
    with err.status(f"starting {what}…"):
        info = localcluster.up(nodes, real_node)
    err.print(f"[green]✓[/green] local cluster at {info.server} with nodes: {', '.join(info.nodes)}")
    out.print(info.export_line, markup=False, highlight=False, soft_wrap=True)


@app.command()
@cli_errors
def down():
    """Stop the local cluster; no process or port stays behind."""
    localcluster.down()
    err.print("[green]✓[/green] local cluster stopped")


@app.command()
@cli_errors
def status():
    """Show the local cluster; exit code 1 when it is not running."""
    info = localcluster.status()
    if info is None:
        err.print("local cluster: not running (start it with `tfhelm cluster up`)")
        raise typer.Exit(1)
    err.print(f"local cluster at {info.server} with nodes: {', '.join(info.nodes)}")
    out.print(info.export_line, markup=False, highlight=False, soft_wrap=True)
