"""Where the charts are, and their default values."""

from __future__ import annotations

import copy
import os
from functools import cache
from pathlib import Path

import yaml


def charts_dir() -> Path:
    """`TFHELM_CHARTS_DIR`, else the charts installed with the package (a wheel carries
    them as `tfhelm/charts/`), else the source checkout's `charts/` next to the package."""
    env = os.environ.get("TFHELM_CHARTS_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    installed = here / "charts"
    return installed if (installed / "tf-cluster" / "Chart.yaml").is_file() else here.parent / "charts"


def chart_version(chart: str = "tf-cluster") -> str:
    return yaml.safe_load((chart_path(chart) / "Chart.yaml").read_text())["version"]


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
