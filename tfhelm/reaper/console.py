"""The reaper at a console: `tfhelm reap` and `tfhelm up --reap` run it with its decisions
as lines (or JSON records) and the wait as a spinner, and close with one line."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    from rich.console import Console

    from tfhelm.kube import Kube
    from tfhelm.reaper import ReapConfig, Result


def run_reaper(kube: Kube, namespace: str, name: str | None, config: ReapConfig, console: Console,
               *, forever: bool = False, helm=None, log_format: str = "plain",
               metrics=None) -> Result | None:
    """Reap one cluster (or, with name None, every cluster of the namespace, forever).
    Decisions are printed as lines (`json`: one JSON object each, on stderr, no spinner); the
    wait shows as a spinner on a terminal."""
    from tfhelm.reaper import KubeReapClient, Reaper

    kube.ping()
    client = KubeReapClient(kube, helm)
    interactive = console.is_terminal
    if log_format == "json":
        return Reaper(client, namespace, name, config, forever=forever, log_record=json_record,
                      metrics=metrics).run()

    def line(text: str) -> None:
        stamp = datetime.now().strftime("%H:%M:%S")
        console.print(f"[dim]{stamp}[/dim] {escape(text)}", highlight=False, soft_wrap=True)

    if not interactive:
        return Reaper(client, namespace, name, config, forever=forever, log_line=line,
                      metrics=metrics).run()
    with console.status(f"watching {namespace}/{name or '*'}") as spinner:
        def on_status(cluster: str, text: str) -> None:
            spinner.update(escape(f"{namespace}/{cluster}: {text}"))
        return Reaper(client, namespace, name, config, forever=forever, log_line=line,
                      on_status=on_status, metrics=metrics).run()


def json_record(record: dict) -> None:
    """One reaper log record as a line of JSON on stderr (the launcher's shape)."""
    from tfhelm.launcher import json_line

    print(json_line(record.pop("level"), "tfhelm-reaper", record.pop("msg"), **record),
          file=sys.stderr, flush=True)


def summarize(result: Result, namespace: str, console: Console, log_format: str = "plain") -> int:
    """The closing line; returns the exit code (1 when training failed)."""
    from tfhelm.reaper import KEEP

    where = f"{namespace}/{result.cluster}"
    if log_format == "json":
        failed = result.outcome != "Complete"
        json_record({"level": "warning" if failed else "info", "namespace": namespace,
                     "cluster": result.cluster, "msg": f"{'kept' if result.action == KEEP else 'reaped'}: "
                     + (result.message if result.action == KEEP else
                        "; ".join(result.removed) or "parameter servers already gone")
                     + (" (training failed)" if failed and result.action != KEEP else "")})
        return 0 if not failed else 1
    if result.action == KEEP:
        console.print(f"[yellow]kept[/yellow] {escape(where)}: {escape(result.message)}",
                      highlight=False, soft_wrap=True)
    else:
        colour = "green" if result.outcome == "Complete" else "yellow"
        console.print(f"[{colour}]✓[/{colour}] reaped {escape(where)}: "
                      f"{escape('; '.join(result.removed) or 'parameter servers already gone')}"
                      + ("" if result.outcome == "Complete" else " (training failed)"),
                      highlight=False, soft_wrap=True)
    return 0 if result.outcome == "Complete" else 1
