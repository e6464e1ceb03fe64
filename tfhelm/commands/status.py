"""`tfhelm status NAME`: a TF cluster's tasks, Jobs and parameter servers (tfhelm.cluster.report
builds the report; this module reads the options and prints)."""

from __future__ import annotations

from typing import Annotated

import typer

from tfhelm.commands import options as o
from tfhelm.console import cli_errors


@cli_errors
def status(name: o.ClusterName, namespace: o.Namespace = None, output: o.Output = "table",
           tasks: Annotated[bool, typer.Option("--tasks", help="List every task (beyond 20 tasks "
                                               "the table shows counts per phase and the exceptions).")] = False):
    """Tasks, Job progress and parameter-server state of a TF cluster (exit 1: training failed)."""
    from tfhelm.cluster import deploy, report, spec
    from tfhelm.errors import TrainingFailed
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube
    from tfhelm.output import check_format

    fmt = check_format(output)
    ns = o.namespace_of(namespace)
    spec.validate_name(name, field="NAME")
    installed = deploy.find(name, ns, Helm())
    # The same exit code whatever the format: a script reads it without parsing the report.
    if report.show(Kube(), ns, name, installed, fmt, every_task=tasks) == "Failed":
        raise typer.Exit(TrainingFailed.exit_code)
