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
    from tfhelm.cluster import deploy, spec
    from tfhelm.errors import SpecError
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube
    from tfhelm.workspace.rules import notebook_path

    ns = o.namespace_of(namespace)
    spec.validate_name(name, field="NAME")
    if not deploy.down(name, ns, Helm(), Kube(), purge=purge, notify=note, mounted=notebook_path):
        raise SpecError("NAME", f"no TF cluster '{name}' in namespace {ns}", "see `tfhelm list -n NAMESPACE`")
    if not purge:
        err.print("PVCs (data, logs, checkpoints) were kept; `--purge` deletes them.")
