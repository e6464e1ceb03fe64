#!/usr/bin/env python3
"""Write each chart's values.schema.json (what Helm reads) from its values.schema.yaml, the
`$defs` both charts share (charts/values.schema.defs.yaml) and the chart contract
(charts/tf-cluster/charts/tf-cluster-lib/files/contract.yaml, which tfhelm and the templates read).

A chart's own `$defs` entry with `$extends: NAME` is the shared NAME with the entry's
`properties` first and its `required` added. A string tagged `!contract` takes values from
the contract: `{patterns.dns1123Label}` in it
becomes that pattern; a string that is one reference alone becomes the value (a number
stays a number). `make schemas` runs this; tests/chart/test_schemas.py fails when a
values.schema.json is stale.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CHARTS = REPO / "charts"
CONTRACT = CHARTS / "tf-cluster" / "charts" / "tf-cluster-lib" / "files" / "contract.yaml"
SHARED_DEFS = CHARTS / "values.schema.defs.yaml"
NAMES = ("tf-cluster", "user-env")
REFERENCE = re.compile(r"\{([A-Za-z]\w*(?:\.[A-Za-z]\w*)+)\}")  # never a regex's {m,n}


def _loader(contract: dict) -> type:
    def lookup(match: re.Match):
        node = contract
        for key in match.group(1).split("."):
            node = node[key]
        return node

    def construct(loader, node):
        text = loader.construct_scalar(node)
        whole = REFERENCE.fullmatch(text)
        return lookup(whole) if whole else REFERENCE.sub(lambda m: str(lookup(m)), text)

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!contract", construct)
    return Loader


def schema(chart: str) -> dict:
    loader = _loader(yaml.safe_load(CONTRACT.read_text()))
    own = yaml.load((CHARTS / chart / "values.schema.yaml").read_text(), Loader=loader)
    shared = yaml.load(SHARED_DEFS.read_text(), Loader=loader)
    defs = {name: _extended(node, shared) for name, node in own.get("$defs", {}).items()}
    clash = [name for name, node in own.get("$defs", {}).items() if name in shared and "$extends" not in node]
    if clash:
        raise SystemExit(f"{chart}: $defs {clash} are in {SHARED_DEFS.name} too: give them other names")
    return {**own, "$defs": {**defs, **{k: v for k, v in shared.items() if k not in defs}}}


def _extended(node: dict, shared: dict) -> dict:
    if "$extends" not in node:
        return node
    base, extra = shared[node["$extends"]], {k: v for k, v in node.items() if k != "$extends"}
    return {**base, **extra, "properties": {**extra.get("properties", {}), **base["properties"]},
            "required": sorted({*base.get("required", []), *extra.get("required", [])})}


def schema_json(chart: str) -> str:
    return json.dumps(schema(chart), indent=2) + "\n"


def main() -> int:
    for chart in NAMES:
        target = CHARTS / chart / "values.schema.json"
        target.write_text(schema_json(chart))
        print(f"wrote {target.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
