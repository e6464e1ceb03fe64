"""templates/monitoring/ against the real Prometheus Operator CRDs (taken from the operator's
Go module by hack/monitoring-crds.sh), with `kubectl apply --dry-run=server --validate=strict`:
the API server checks the PodMonitor and PrometheusRule against the CRDs' own schemas, and
the dashboard ConfigMap as any ConfigMap."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tfhelm.cluster.manifests import render

from .conftest import wait_for
from .test_gitops import REPO, kubectl

ON = {"monitoring": {"podMonitor": {"enabled": True, "labels": {"release": "kps"}},
                     "prometheusRule": {"enabled": True}, "dashboard": {"enabled": True}},
      "reaper": {"enabled": True}}


@pytest.fixture(scope="module")
def crds(kubeconfig, tmp_path_factory):
    out = tmp_path_factory.mktemp("crds")
    made = subprocess.run([str(REPO / "hack" / "monitoring-crds.sh"), str(out)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    files = sorted(out.glob("*.yaml"))
    names = [yaml.safe_load(f.read_text())["metadata"]["name"] for f in files]
    assert set(names) == {"podmonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"}
    applied = kubectl("apply", "--server-side", "--force-conflicts", *sum((["-f", str(f)] for f in files), []))
    assert applied.returncode == 0, applied.stderr

    def established(name: str) -> bool:
        res = kubectl("get", "crd", name, "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}")
        return res.stdout == "True"
    for name in names:
        wait_for(lambda: established(name), 60, what=f"CRD {name} established")
    yield names
    kubectl("delete", "crd", *names, "--wait=false")


def monitoring_docs(namespace: str) -> list[dict]:
    docs = render(ON, "mnist", namespace)
    return [d for d in docs if d["kind"] in ("PodMonitor", "PrometheusRule")
            or (d["kind"] == "ConfigMap" and d["metadata"]["name"] == "mnist-dashboard")]


def dry_run(docs: list[dict], namespace: str) -> subprocess.CompletedProcess:
    return kubectl("apply", "--dry-run=server", "--validate=strict", "-n", namespace, "-f", "-",
                   stdin=yaml.safe_dump_all(docs))


def test_the_monitoring_objects_pass_the_operators_crds(crds, namespace):
    docs = monitoring_docs(namespace)
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "PodMonitor", "PrometheusRule"]
    res = dry_run(docs, namespace)
    assert res.returncode == 0, res.stderr
    assert len([ln for ln in res.stdout.splitlines() if ln.endswith("(server dry run)")]) == 3, res.stdout


@pytest.mark.parametrize("kind,path,bad", [
    ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "scheme"), "gopher"),  # enum in the CRD
    ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "portz"), "metrics"),  # unknown field
    ("PrometheusRule", ("spec", "groups", 0, "rules", 0, "for"), "soon"),  # a duration pattern
])
def test_the_crd_schemas_are_really_enforced(crds, namespace, kind, path, bad):
    """The dry run above could pass on a CRD without a schema: prove it would not."""
    doc = next(d for d in monitoring_docs(namespace) if d["kind"] == kind)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    res = dry_run([doc], namespace)
    assert res.returncode != 0, res.stdout
    assert str(path[-1]) in res.stderr, res.stderr
