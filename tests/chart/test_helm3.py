"""Both charts render the same with Helm 3 (bin/helm3, `make helm3`) as with Helm 4, line
for line: users and GitOps controllers still on Helm 3 get the same objects."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tfhelm.chart import chart_path
from tfhelm.helm import helm_executable

HELM3 = Path(__file__).resolve().parents[2] / "bin" / "helm3"
CASES = [
    ("tf-cluster", {}),
    ("tf-cluster", {"worker": {"replicas": 4}, "ps": {"replicas": 2}, "chief": {"enabled": True},
                    "evaluator": {"enabled": True}, "reaper": {"enabled": True}, "mode": "in-graph",
                    "code": {"source": "url", "url": "http://files/train.py", "script": "train.py"},
                    "commonAnnotations": {"a": "b"}, "nodeSelector": {"pool": "tf"},
                    "serviceAccount": {"create": True}, "global": {"imageRegistry": "mirror:5000"}}),
    ("tf-cluster", {"logFormat": "json", "reaper": {"enabled": True}, "chief": {"enabled": True},
                    "monitoring": {"podMonitor": {"enabled": True, "labels": {"release": "kps"}},
                                   "prometheusRule": {"enabled": True}, "dashboard": {"enabled": True}}}),
    ("user-env", {"networkPolicy": {"metricsFrom": [{"namespaceSelector": {"matchLabels": {"team": "obs"}}}]}}),
    ("user-env", {"notebook": {"token": {"existingSecret": "tok"}, "ingress": {"enabled": True}}}),
]


def template(exe: str, chart: str, values: dict) -> subprocess.CompletedProcess:
    return subprocess.run([exe, "template", "rel", str(chart_path(chart)), "-n", "tfhelm-user-ns", "-f", "-"],
                          input=json.dumps(values), capture_output=True, text=True)


@pytest.mark.parametrize("chart,values", CASES)
def test_helm3_and_helm4_render_the_same(chart, values):
    assert HELM3.exists(), "bin/helm3 missing: `make helm3` builds it"
    v3 = subprocess.run([str(HELM3), "version", "--short"], capture_output=True, text=True).stdout
    assert v3.startswith("v3."), v3
    three, four = template(str(HELM3), chart, values), template(helm_executable(), chart, values)
    assert three.returncode == 0, three.stderr
    assert four.returncode == 0, four.stderr
    # The same objects, in the same order (Helm 4 only trims blank lines between documents).
    assert objects(three.stdout) == objects(four.stdout)
    assert [ln for ln in three.stdout.splitlines() if ln.strip()] == [ln for ln in four.stdout.splitlines() if ln.strip()]


def objects(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_helm3_applies_the_schema_too(tf_chart):
    bad = template(str(HELM3), "tf-cluster", {"worker": {"replica": 3}})
    assert bad.returncode != 0 and "replica" in bad.stderr
