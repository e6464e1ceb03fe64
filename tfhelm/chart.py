"""Where the charts are, and their default values."""

from __future__ import annotations

import copy
import os
from functools import cache
from pathlib import Path

import yaml


def charts_dir() -> Path:
    """`TFHELM_CHARTS_DIR`, else the repository's `charts/` next to this package."""
    env = os.environ.get("TFHELM_CHARTS_DIR")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "charts"


def chart_path(chart: str = "tf-cluster") -> Path:
    return charts_dir() / chart


@cache
def _defaults(chart: str) -> dict:
    return yaml.safe_load((chart_path(chart) / "values.yaml").read_text())


def default_values(chart: str = "tf-cluster") -> dict:
    return copy.deepcopy(_defaults(chart))


def deep_merge(base: dict, override: dict) -> dict:
    """Helm's coalescing of values: maps merge recursively, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out
