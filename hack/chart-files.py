#!/usr/bin/env python3
"""Write the chart's copy of the task launcher: tfhelm/launcher.py without its docstrings,
comments and blank lines, as charts/tf-cluster/charts/tf-cluster-lib/files/launcher.py.

The copy sits in the library subchart (which Helm does not store in release Secrets), but
every release's config ConfigMap carries it, so each of its bytes is stored once per
revision and mounted into every task. The documented source stays in tfhelm/; `make
chart-files` runs this, and tests/chart/test_programs.py fails when the copy is stale.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COPIES = {REPO / "tfhelm" / "launcher.py": REPO / "charts" / "tf-cluster" / "charts" / "tf-cluster-lib" / "files" / "launcher.py"}
HEADER = "# Generated from tfhelm/launcher.py by `make chart-files`: read and edit that file.\n"


def strip(source: str) -> str:
    """The same program without docstrings, comments and blank lines (code lines verbatim;
    a body that held only a docstring gets `pass`)."""
    drop: set[int] = set()  # lines of docstrings
    passes: dict[int, str] = {}  # first line of a lone docstring -> its indentation
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            continue
        doc = body[0]
        drop.update(range(doc.lineno, doc.end_lineno + 1))
        if len(body) == 1:
            passes[doc.lineno] = " " * doc.col_offset
    lines = source.splitlines()
    cut: dict[int, int] = {}  # line -> column where its comment starts
    in_string: set[int] = set()  # lines inside a multi-line string: kept as they are
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            cut[tok.start[0]] = tok.start[1]
        elif tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            in_string.update(range(tok.start[0] + 1, tok.end[0] + 1))
    out = []
    for number, line in enumerate(lines, 1):
        if number in drop:
            if number in passes:
                out.append(passes[number] + "pass")
            continue
        if number in in_string:
            out.append(line)
            continue
        line = line[:cut.get(number, len(line))].rstrip()
        if line:
            out.append(line)
    return "\n".join(out) + "\n"


def chart_copy(source: Path) -> str:
    return HEADER + strip(source.read_text())


def main() -> int:
    for source, copy in COPIES.items():
        copy.write_text(chart_copy(source))
        print(f"wrote {copy.relative_to(REPO)} ({copy.stat().st_size} bytes, from "
              f"{source.relative_to(REPO)}: {source.stat().st_size})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
