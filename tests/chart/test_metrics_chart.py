"""Observability in the tf-cluster chart: every task's metrics port (`metrics:`), JSON logs
(`logFormat`) and the reaper's metrics (`reaper.metrics`)."""

from __future__ import annotations

import re

import pytest

from tfhelm.cluster.manifests import by_kind
from tfhelm.errors import RenderError

from .conftest import pod_specs, render

ROLES = {"chief": {"enabled": True}, "evaluator": {"enabled": True}, "worker": {"replicas": 3},
         "ps": {"replicas": 2}}


def tf_container(spec: dict) -> dict:
    (c,) = [c for c in spec["containers"] if c["name"] == "tensorflow"]
    return c


def reaper(manifests: list[dict]) -> dict:
    (dep,) = [d for d in by_kind(manifests, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    return dep["spec"]["template"]["spec"]


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# -- every task's metrics endpoint

def test_every_task_serves_metrics_by_default():
    specs = pod_specs(render(ROLES))
    assert set(specs) == {"mnist-chief", "mnist-evaluator", "mnist-worker", "mnist-ps-0", "mnist-ps-1"}
    for name, spec in specs.items():
        c = tf_container(spec)
        assert {"name": "metrics", "containerPort": 9090} in c["ports"], name
        env = env_of(c)
        assert env["TFHELM_METRICS_PORT"] == "9090" and "TFHELM_METRICS_PROGRESS" not in env, name
        failures = {k: v for k, v in env.items() if k.startswith("TFHELM_INDEX_")}
        if name.startswith("mnist-ps"):
            assert not failures, "a PS is a Deployment: no Job index"
        else:
            assert failures == {
                "TFHELM_INDEX_FAILURES": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"}},
                "TFHELM_INDEX_IGNORED_FAILURES": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-index-ignored-failure-count']"}},
            }


def test_in_graph_and_custom_commands_serve_too():
    """Server mode (PS, in-graph workers) and exec mode run under the launcher as well."""
    specs = pod_specs(render({"mode": "in-graph", "chief": {"enabled": True},
                              "worker": {"command": ["python3", "-m", "trainer"]}}))
    for spec in specs.values():
        assert "metrics" in [p["name"] for p in tf_container(spec)["ports"]]
        assert tf_container(spec)["command"][:2] == ["python3", "/etc/tfhelm/launcher.py"]


def test_metrics_off_opens_no_port():
    for spec in pod_specs(render({**ROLES, "metrics": {"enabled": False}})).values():
        c = tf_container(spec)
        assert [p["name"] for p in c["ports"]] == ["tf"]
        assert not [k for k in env_of(c) if k.startswith(("TFHELM_METRICS", "TFHELM_INDEX_"))]


def test_training_progress_can_be_turned_off_and_the_port_moved():
    specs = pod_specs(render({"metrics": {"trainingProgress": False, "port": 9464}}))
    env = env_of(tf_container(specs["mnist-worker"]))
    assert env["TFHELM_METRICS_PROGRESS"] == "0" and env["TFHELM_METRICS_PORT"] == "9464"


def test_the_metrics_port_cannot_be_the_tensorflow_port():
    with pytest.raises(RenderError, match="metrics.port 2222 is the TensorFlow servers' port"):
        render({"metrics": {"port": 2222}})


@pytest.mark.parametrize("values,message", [
    ({"metrics": {"port": 0}}, "metrics.port: minimum"),
    ({"metrics": {"enabled": "yes"}}, "metrics.enabled:"),
    ({"metrics": {"scrape": True}}, "metrics: additional properties 'scrape' not allowed"),
    ({"logFormat": "yaml"}, "logFormat:"),
    ({"reaper": {"metrics": {"port": 70000}}}, "reaper.metrics.port: maximum"),
])
def test_schema_rejects_bad_observability_values(values, message):
    with pytest.raises(RenderError, match=re.escape(message)):
        render(values)


# -- JSON logs

def test_json_logs_reach_the_launcher_in_every_container_that_runs_it():
    manifests = render({**ROLES, "logFormat": "json", "reaper": {"enabled": True},
                        "code": {"packages": ["pandas==2.2.3"]}})
    specs = pod_specs(manifests)
    for name, spec in specs.items():
        assert env_of(tf_container(spec))["TFHELM_LOG_FORMAT"] == "json", name
        for init in spec.get("initContainers", []):
            if init["name"] == "install-packages":
                assert env_of(init)["TFHELM_LOG_FORMAT"] == "json"
    assert "--log-format=json" in reaper(manifests)["containers"][0]["args"]


def test_plain_logs_are_the_default():
    manifests = render({**ROLES, "reaper": {"enabled": True}})
    specs = pod_specs(manifests)
    assert not [n for n, s in specs.items() if "TFHELM_LOG_FORMAT" in env_of(tf_container(s))]
    assert not [a for a in reaper(manifests)["containers"][0]["args"] if a.startswith("--log-format")]


# -- the reaper's metrics

def test_the_reaper_serves_metrics_on_its_metrics_port():
    (c,) = reaper(render({"reaper": {"enabled": True}}))["containers"]
    assert "--metrics-port=9090" in c["args"] and c["ports"] == [{"name": "metrics", "containerPort": 9090}]
    (c,) = reaper(render({"reaper": {"enabled": True, "metrics": {"enabled": False}}}))["containers"]
    assert not [a for a in c["args"] if a.startswith("--metrics-port")] and "ports" not in c


