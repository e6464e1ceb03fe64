"""`tfhelm status NAME`: a TF cluster's tasks, Jobs and parameter servers (tfhelm.status
builds the report; this module reads the options and prints)."""

from __future__ import annotations

import typer
from rich.markup import escape

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err, out


@cli_errors
def status(name: o.ClusterName, namespace: o.Namespace = None, output: o.Output = "table"):
    """Tasks, Job progress and parameter-server state of a TF cluster (exit 1: training failed)."""
    from tfhelm import deploy, spec, training
    from tfhelm import status as core
    from tfhelm.errors import SpecError, TrainingFailed
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube
    from tfhelm.output import check_format, emit, table
    from tfhelm.reaper import cluster_events

    fmt = check_format(output)
    ns = o.namespace_of(namespace)
    spec.validate_name(name, field="NAME")
    installed = deploy.find(name, ns, Helm())
    kube = Kube()
    objs = kube.objects(ns, name)
    if not (objs.pods or objs.jobs or objs.deployments or installed.ps or installed.workload):
        raise SpecError("NAME", f"no TF cluster '{name}' in namespace {ns}", "see `tfhelm list -n NAMESPACE`")
    if installed.interrupted:
        err.print(f"[yellow]{escape(installed.interrupted_line())}[/yellow]", highlight=False, soft_wrap=True)
    events = cluster_events(kube, ns, objs.jobs)
    if fmt != "table":
        emit(core.report(ns, name, objs, events), fmt)
    else:
        table(("TASK", "POD", "PHASE", "RESTARTS", "NODE"),
              [(r.task, r.pod, r.phase, r.restarts, r.node) for r in core.task_rows(objs)],
              title=f"TF cluster {ns}/{name}")
        for j in training.job_rows(objs.jobs):
            out.print(f"job {j.name}: {j.succeeded}/{j.total} succeeded, {j.failed} failed — {j.state}",
                      markup=False, highlight=False)
        out.print(f"parameter servers: {core.ps_state(objs)}", markup=False, highlight=False)
        for line in core.reaper_lines(events):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    # The same exit code whatever the format: a script reads it without parsing the report.
    if training.training_done(training.job_rows(objs.jobs)) == "Failed":
        raise typer.Exit(TrainingFailed.exit_code)
