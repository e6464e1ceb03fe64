"""`tfhelm reap NAME`: wait until a cluster's training is done, then remove its parameter
servers (the in-cluster reaper runs this same command with `--forever`). Thin: the
decisions are tfhelm.reaper's; this module only reads options and prints."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from rich.markup import escape

from tfhelm.commands import options as o
from tfhelm.console import cli_errors, err, printable


def _remove_interrupted(name: str, namespace: str) -> bool:
    """An interrupted install (a PS release without workload release or Jobs: nothing
    trains) is removed at once, and said so."""
    from tfhelm.api import reaping
    from tfhelm.cluster import spec

    if reaping.remove_interrupted(name, namespace):
        err.print(f"[green]✓[/green] reaped {escape(f'{namespace}/{name}')}: interrupted install, "
                  f"uninstalled release {escape(spec.ps_release(name))} (no workload release, no Jobs)",
                  highlight=False, soft_wrap=True)
        return True
    return False


@cli_errors
def reap(name: Annotated[Optional[str], typer.Argument(
             help="Cluster name (or --all).", show_default=False)] = None,
         namespace: o.Namespace = None,
         grace: Annotated[Optional[int], typer.Option(
             "--grace", help="Seconds between training done and PS removal (default: the chart's "
             "reaper.grace).", show_default=False)] = None,
         completion: Annotated[Optional[str], typer.Option(
             "--completion", help="When training is done: auto (the chief if there is one, else "
             "all workers), all-workers, chief, worker-0 (default: the chart's reaper.completion).",
             show_default=False)] = None,
         on_failure: Annotated[Optional[str], typer.Option(
             "--on-failure", help="If training failed: keep the PS for debugging, or reap (default: "
             "the chart's reaper.onFailure).", show_default=False)] = None,
         all_clusters: Annotated[bool, typer.Option(
             "--all", help="Every cluster in the namespace, with one watch; runs until stopped.")] = False,
         forever: Annotated[bool, typer.Option(
             "--forever", help="Keep watching after the reap (re-runs are reaped too).")] = False,
         delete_directly: Annotated[bool, typer.Option(
             "--delete-directly",
             help="Delete the PS Deployments and Services by name and never run Helm (the "
                  "in-cluster reaper: no access to Secrets; the NAME-ps release record stays).")] = False,
         log_format: Annotated[str, typer.Option(
             "--log-format", help="plain (lines for humans) or json (one JSON object a line, for "
             "log collectors: ts, level, logger, namespace, cluster, msg).")] = "plain",
         metrics_port: Annotated[int, typer.Option(
             "--metrics-port", help="Serve Prometheus metrics (clusters watched, reaps, reap latency, "
             "errors) at :PORT/metrics; 0: none.")] = 0,
         gates: Annotated[bool, typer.Option(
             "--gates", help="A Kueue-queued cluster (chart `queue.name`): remove the scheduling gate "
             "of its PS, chief and evaluator pods while Kueue has admitted the workers, and evict them "
             "(back to gated) while it has not (docs/queue.md). The in-cluster reaper does this.")] = False,
         gates_only: Annotated[bool, typer.Option(
             "--gates-only", help="Only --gates: never remove the parameter servers.")] = False):
    """Remove a cluster's parameter servers once training is done; PVCs and Jobs stay.

    Exit code 1 when training failed (the PS are kept unless --on-failure reap)."""
    from tfhelm.api import reaping
    from tfhelm.api.options import namespace_of
    from tfhelm.chart import default_values
    from tfhelm.cluster import spec
    from tfhelm.errors import TRAINING_FAILED, SpecError
    from tfhelm.reaper.rules import ReapConfig
    from tfhelm.reaper.lines import json_record, summarize

    if bool(name) == all_clusters:
        raise SpecError("NAME", "give a cluster name or --all, not both" if name
                        else "missing cluster name", "e.g. tfhelm reap mnist -n team-a")
    if name:
        spec.validate_name(name, field="NAME")
    if log_format not in ("plain", "json"):
        raise SpecError("--log-format", f"'{log_format}' is not a log format", "use plain or json")
    if not 0 <= metrics_port <= 65535:
        raise SpecError("--metrics-port", f"{metrics_port} is not a port", "use 1-65535, or 0 for none")
    # The chart's `reaper:` values are the defaults, read only when a command runs (YAML
    # would cost every `tfhelm --help`): the in-cluster reaper's defaults are this command's.
    chart = default_values()["reaper"]
    config = ReapConfig(chart["grace"] if grace is None else grace, completion or chart["completion"],
                        on_failure or chart["onFailure"], delete_directly).validate()
    ns = namespace_of(namespace)
    if name and not (forever or delete_directly) and _remove_interrupted(name, ns):
        return
    try:
        metrics = None
        if metrics_port:
            from tfhelm.reaper.metrics import ReaperMetrics, serve

            metrics = ReaperMetrics()

            def say(text: str) -> None:
                level = "warning" if text.startswith("warning: ") else "info"
                if log_format == "json":
                    json_record({"level": level, "namespace": ns, "msg": text.removeprefix("warning: ")})
                else:
                    err.print(escape(printable(text)), highlight=False, soft_wrap=True)
            serve(metrics, metrics_port, say)
        result = reaping.run_reaper(ns, name, config, err, forever=forever or all_clusters or gates_only,
                                    log_format=log_format, metrics=metrics, gates=gates or gates_only,
                                    reap=not gates_only)
    except KeyboardInterrupt:  # the PS stay; running `tfhelm reap` again picks up from here
        err.print("interrupted: nothing was removed that was not reported above")
        sys.exit(130)
    if result is not None and summarize(result, ns, err, log_format):
        raise typer.Exit(TRAINING_FAILED)
