"""How the reaper's outcome reads: the closing line of `tfhelm reap` and `tfhelm up --reap`,
and a log record as a line of JSON. Pure (the caller's console prints)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    from rich.console import Console

    from tfhelm.reaper.rules import Result


def json_record(record: dict) -> None:
    """One reaper log record as a line of JSON on stderr (the launcher's shape)."""
    from tfhelm.pod.logs import json_line

    print(json_line(record.pop("level"), "tfhelm-reaper", record.pop("msg"), **record),
          file=sys.stderr, flush=True)


def summarize(result: Result, namespace: str, console: Console, log_format: str = "plain") -> int:
    """The closing line; returns the exit code (1 when training failed)."""
    from tfhelm.reaper.rules import KEEP

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
