"""`tfhelm list`: the TF clusters of a namespace (or all), however they were installed."""

from __future__ import annotations

from typing import Optional

import typer

from tfhelm import status
from tfhelm.console import cli_errors
from tfhelm.kube import Kube, namespace_or_current
from tfhelm.output import OutputOpt, check_format, emit, table


@cli_errors
def list_(namespace: Optional[str] = typer.Option(None, "--namespace", "-n",
                                                  help="Namespace (default: the kubeconfig's)."),
          all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A",
                                              help="Every namespace."),
          output: str = OutputOpt):
    """TF clusters: workers succeeded, PS ready, training state."""
    fmt = check_format(output)
    ns = None if all_namespaces else namespace_or_current(namespace)
    kube = Kube()
    kube.ping()
    rows = status.cluster_rows(*kube.tf_workloads(ns))
    if fmt != "table":
        emit([{"namespace": r.namespace, "name": r.name, "workers": r.workers, "ps": r.ps,
               "chief": r.chief, "training": r.training} for r in rows], fmt)
        return
    table(("NAMESPACE", "NAME", "WORKERS", "PS", "CHIEF", "TRAINING"),
          [(r.namespace, r.name, r.workers, r.ps, "yes" if r.chief else "no", r.training)
           for r in rows], title="TF clusters")
