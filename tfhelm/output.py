"""How results are printed: a table for people on a terminal, plain columns when piped
(no colour, no truncation: `grep` and `awk` see every name whole), JSON or YAML for programs."""

from __future__ import annotations

import json
from typing import Sequence

from tfhelm.console import out, printable, write
from tfhelm.errors import SpecError

FORMATS = ("table", "json", "yaml")


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise SpecError("--output", f"'{fmt}' is not a format", "use table, json or yaml")
    return fmt


def emit(data, fmt: str) -> None:
    """`data` (plain dicts and lists) as JSON or YAML on stdout."""
    if fmt == "json":
        text = json.dumps(data, indent=2, default=str) + "\n"
    else:
        from tfhelm import yamlio

        text = yamlio.dump(data, sort_keys=False, default_flow_style=False)
    write(text)


def plain_columns(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    """kubectl-style columns: padded to the widest cell, never cut."""
    cells = [list(columns)] + [["" if c is None else printable(str(c)) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n" for r in cells)


def table(columns: Sequence[str], rows: Sequence[Sequence], title: str = "") -> None:
    if not out.is_terminal:
        out.print(plain_columns(columns, rows), end="", markup=False, highlight=False, soft_wrap=True)
        return
    from rich.table import Table

    t = Table(title=title or None)
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*("" if c is None else printable(str(c)) for c in row))
    out.print(t)
