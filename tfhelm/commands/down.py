"""`tfhelm down NAME`: uninstall a TF cluster; its PVCs stay unless --purge."""

from __future__ import annotations

from typing import Annotated

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err, note


@cli_errors
def down(name: o.ClusterName, namespace: o.Namespace = None,
         purge: Annotated[bool, typer.Option(
             "--purge", help="Also delete the data and logs PVCs.")] = False):
    """Uninstall a TF cluster (both releases). Data, logs and checkpoints stay unless --purge."""
    from tfhelm.api import clusters

    clusters.Cluster(name, namespace).down(purge=purge, progress=note)
    if not purge:
        err.print("PVCs (data, logs, checkpoints) were kept; `--purge` deletes them.")

