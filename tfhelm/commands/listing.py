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
    """TF clusters: workers succeeded, PS ready, training state (and, queued in Kueue, where)."""
    from tfhelm.api import clusters
    from tfhelm.output import check_format, emit, table

    fmt = check_format(output)
    rows = clusters.list_clusters(namespace, all_namespaces)
    if fmt != "table":
        emit([{"namespace": r.namespace, "name": r.name, "workers": r.workers, "ps": r.ps,
               "chief": r.chief, "training": r.training, **({"queue": r.queue} if r.queue else {})}
              for r in rows], fmt)
        return
    queues = any(r.queue for r in rows)  # the column only where some cluster is queued
    table(("NAMESPACE", "NAME", "WORKERS", "PS", "CHIEF", "TRAINING", *(("QUEUE",) if queues else ())),
          [(r.namespace, r.name, r.workers, r.ps, "yes" if r.chief else "no", r.training,
            *((r.queue or "-",) if queues else ())) for r in rows], title="TF clusters")
