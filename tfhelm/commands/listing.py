"""`tfhelm list`: the TF clusters of a namespace (or all), however they were installed."""

from __future__ import annotations

from typing import Annotated

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors


@cli_errors
def list_(namespace: o.Namespace = None,
          all_namespaces: Annotated[bool, typer.Option(
              "--all-namespaces", "-A", help="Every namespace.")] = False,
          output: o.Output = "table"):
    """TF clusters: workers succeeded, PS ready, training state."""
    from tfhelm.cluster import report
    from tfhelm.kube import Kube
    from tfhelm.output import check_format, emit, table

    fmt = check_format(output)
    ns = None if all_namespaces else o.namespace_of(namespace)
    kube = Kube()
    kube.ping()
    rows = report.list_clusters(kube, ns)
    if fmt != "table":
        emit([{"namespace": r.namespace, "name": r.name, "workers": r.workers, "ps": r.ps,
               "chief": r.chief, "training": r.training} for r in rows], fmt)
        return
    table(("NAMESPACE", "NAME", "WORKERS", "PS", "CHIEF", "TRAINING"),
          [(r.namespace, r.name, r.workers, r.ps, "yes" if r.chief else "no", r.training)
           for r in rows], title="TF clusters")
