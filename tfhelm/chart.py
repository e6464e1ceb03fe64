"""Where the charts are, and their default values."""

from __future__ import annotations

import copy
import hashlib
from functools import cache
from pathlib import Path

from tfhelm import yamlio
from tfhelm.contract import charts_dir

__all__ = ["chart_digest", "chart_path", "chart_version", "charts_dir", "deep_merge", "default_values"]


# What a chart version pins: everything that changes what it renders. README and Chart.yaml
# (metadata) may change within a version; values.schema.yaml is pinned by the JSON made from it.
_UNPINNED = {"README.md", "README.md.gotmpl", ".helmignore", "Chart.yaml", "values.schema.yaml"}


def chart_digest(chart: str = "tf-cluster", root: Path | None = None) -> str:
    """sha256 over the chart's templates, files, values and schema (paths and bytes)."""
    base = (root or charts_dir()) / chart
    h = hashlib.sha256()
    for p in sorted(x for x in base.rglob("*") if x.is_file()):
        rel = p.relative_to(base).as_posix()
        if rel in _UNPINNED or "__pycache__" in p.parts:
            continue
        h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return "sha256:" + h.hexdigest()


def chart_version(chart: str = "tf-cluster") -> str:
    return yamlio.load((chart_path(chart) / "Chart.yaml").read_text())["version"]


def chart_path(chart: str = "tf-cluster") -> Path:
    return charts_dir() / chart


@cache
def _defaults(chart: str) -> dict:
    return yamlio.load((chart_path(chart) / "values.yaml").read_text())


def default_values(chart: str = "tf-cluster") -> dict:
    return copy.deepcopy(_defaults(chart))


def deep_merge(base: dict, override: dict, *, over_defaults: bool = False) -> dict:
    """Helm's merge of values: maps merge recursively, anything else replaces (a user's -f
    files and --set). `over_defaults`: the user's values over the chart's, as the templates
    see them; a null then removes the key, and the chart's own nulls go."""
    out = {k: v for k, v in base.items() if not (over_defaults and v is None)}
    for key, value in override.items():
        if value is None and over_defaults:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value, over_defaults=over_defaults)
        else:
            out[key] = value
    return out
