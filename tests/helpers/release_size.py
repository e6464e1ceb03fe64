"""Sizes of a rendered release, measured the way Helm stores it.

Helm keeps each release revision in one Secret: the release (its manifest, hooks, notes,
values and the whole chart: metadata, values, schema and every template and other file,
byte fields base64-encoded) as JSON, gzipped, then base64-encoded. This computes that from
`helm template` output and the chart directory, with .helmignore applied as Helm does.
"""

from __future__ import annotations

import base64
import fnmatch
import gzip
import json
from pathlib import Path

import yaml


def helmignored(chart: Path) -> list[str]:
    ignore = chart / ".helmignore"
    return [line.strip() for line in ignore.read_text().splitlines()
            if line.strip() and not line.startswith("#")] if ignore.exists() else []


def chart_files(chart: Path) -> dict[str, bytes]:
    """The files Helm loads from a chart directory (what `helm package` keeps) and stores in a
    release: not its subcharts (charts/), which Helm loads as dependencies it does not store."""
    patterns = helmignored(chart)  # .helmignore itself is kept, as `helm package` does
    out = {}
    for p in sorted(x for x in chart.rglob("*") if x.is_file()):
        rel = p.relative_to(chart).as_posix()
        if rel.startswith("charts/"):
            continue
        if any(fnmatch.fnmatch(rel, pat.rstrip("/")) or fnmatch.fnmatch(p.name, pat.rstrip("/"))
               or any(part == pat.rstrip("/") for part in p.relative_to(chart).parts)
               for pat in patterns):
            continue
        out[rel] = p.read_bytes()
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def chart_json(chart: Path) -> dict:
    files = chart_files(chart)
    return {
        "metadata": yaml.safe_load(files.pop("Chart.yaml")),
        "templates": [{"name": n, "data": _b64(d)} for n, d in files.items() if n.startswith("templates/")],
        "values": yaml.safe_load(files.pop("values.yaml")),
        "schema": _b64(files.pop("values.schema.json", b"")),
        "files": [{"name": n, "data": _b64(d)} for n, d in files.items() if not n.startswith("templates/")],
    }


def stored_bytes(obj: dict) -> int:
    """Bytes of the release Secret's data: base64(gzip(JSON))."""
    return len(_b64(gzip.compress(json.dumps(obj).encode())))


def stored_release(chart: Path, manifest: str, values: dict, release: str = "r",
                   namespace: str = "default") -> int:
    return stored_bytes({
        "name": release, "namespace": namespace, "version": 1, "config": values,
        "info": {"status": "deployed", "description": "Install complete"},
        "chart": chart_json(chart), "manifest": manifest})


def chart_share(chart: Path) -> int:
    """What the chart alone adds to every stored release."""
    return stored_bytes({"chart": chart_json(chart)})
