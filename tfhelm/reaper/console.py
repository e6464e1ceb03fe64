"""The reaper at a console: `tfhelm reap` and `tfhelm up --reap` run it with its decisions
as lines (or JSON records, tfhelm/reaper/lines.py) and the wait as a spinner."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    from rich.console import Console

    from tfhelm.kube import Kube
    from tfhelm.reaper import ReapConfig, Result


def run_reaper(kube: Kube, namespace: str, name: str | None, config: ReapConfig, console: Console | None,
               *, forever: bool = False, helm=None, log_format: str = "plain",
               metrics=None, gates: bool = False, reap: bool = True) -> Result | None:
    """Reap one cluster (or, with name None, every cluster of the namespace, forever).
    Decisions are printed as lines (`json`: one JSON object each, on stderr, no spinner); the
    wait shows as a spinner on a terminal. No console: nothing is printed."""
    from tfhelm.reaper import KubeReapClient, Reaper

    from tfhelm.reaper.gates import GateRule

    kube.ping()
    client = KubeReapClient(kube, helm)
    more = {"metrics": metrics, "reap": reap, "rules": [GateRule.of(name, config.completion)] if gates else []}
    if console is None:
        return Reaper(client, namespace, name, config, forever=forever, log_line=lambda _: None, **more).run()
    interactive = console.is_terminal
    if log_format == "json":
        from tfhelm.reaper.lines import json_record

        return Reaper(client, namespace, name, config, forever=forever, log_record=json_record, **more).run()

    def line(text: str) -> None:
        stamp = datetime.now().strftime("%H:%M:%S")
        console.print(f"[dim]{stamp}[/dim] {escape(text)}", highlight=False, soft_wrap=True)

    if not interactive:
        return Reaper(client, namespace, name, config, forever=forever, log_line=line, **more).run()
    with console.status(f"watching {namespace}/{name or '*'}") as spinner:
        def on_status(cluster: str, text: str) -> None:
            spinner.update(escape(f"{namespace}/{cluster}: {text}"))
        return Reaper(client, namespace, name, config, forever=forever, log_line=line,
                      on_status=on_status, **more).run()
