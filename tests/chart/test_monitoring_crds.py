"""The rendered PodMonitor and PrometheusRule against the Prometheus Operator's own CRDs (from
its Go module at PROMETHEUS_OPERATOR_VERSION, by hack/monitoring-crds.sh), without a cluster:
each CRD's openAPIV3Schema as JSON Schema, with what `kubectl apply --validate=strict` adds
(unknown fields are errors, except where the schema preserves them). tests/cluster/
test_monitoring.py makes the API server itself check them (a server-side dry run)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from tfhelm.cluster.manifests import by_kind

from .conftest import render

REPO = Path(__file__).resolve().parents[2]
ON = {"monitoring": {"podMonitor": {"enabled": True, "labels": {"release": "kps"}, "interval": "15s"},
                     "prometheusRule": {"enabled": True}}}


def structural(schema):
    """A Kubernetes structural schema as JSON Schema (draft 7), strict about unknown fields."""
    if isinstance(schema, list):
        return [structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (({p: structural(s) for p, s in v.items()}) if k == "properties" else structural(v))
           for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def validators(tmp_path_factory) -> dict[str, jsonschema.Draft7Validator]:
    out = tmp_path_factory.mktemp("crds")
    made = subprocess.run([str(REPO / "hack" / "monitoring-crds.sh"), str(out)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    found = {}
    for f in sorted(out.glob("*.yaml")):
        crd = yaml.safe_load(f.read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        found[crd["spec"]["names"]["kind"]] = jsonschema.Draft7Validator(structural(version["schema"]["openAPIV3Schema"]))
    assert set(found) == {"PodMonitor", "PrometheusRule"}
    return found


def errors(validators, doc: dict) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validators[doc["kind"]].iter_errors(doc)]


@pytest.mark.parametrize("kind", ["PodMonitor", "PrometheusRule"])
def test_the_rendered_objects_match_the_operators_crds(validators, kind):
    (doc,) = by_kind(render(ON), kind)
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert errors(validators, doc) == []


@pytest.mark.parametrize("kind,path,bad,message", [
    ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "scheme"), "gopher", "is not one of"),  # enum
    ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "portz"), "metrics", "'portz' was unexpected"),
    ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "interval"), "often", "does not match"),
    ("PrometheusRule", ("spec", "groups", 0, "rules", 0, "for"), "soon", "does not match"),
    ("PrometheusRule", ("spec", "groups", 0, "rulez"), [], "'rulez' was unexpected"),
])
def test_the_crd_schemas_really_bite(validators, kind, path, bad, message):
    """The check above could pass on a schema that accepts anything: prove it does not."""
    (doc,) = by_kind(render(ON), kind)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    found = errors(validators, doc)
    assert any(message in e for e in found), found
