"""The bench's per-task baseline (bench/baseline.py) is what it claims to be: one Pod and one
Service per task, every pod with the full host list and its own task in TF_CONFIG, and its
extrapolated sizes agree with the generated ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import baseline  # noqa: E402


def test_one_pod_and_service_per_task_with_full_tf_config():
    out = subprocess.run([sys.executable, str(BENCH / "baseline.py"), "mnist", "-w", "3", "--ps", "2",
                          "-n", "team-a"], capture_output=True, text=True, check=True).stdout
    docs = list(yaml.safe_load_all(out))
    pods = [d for d in docs if d["kind"] == "Pod"]
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    assert len(docs) == 10 and len(pods) == 5
    for pod in pods:
        name = pod["metadata"]["name"]
        tf = json.loads(pod["spec"]["containers"][0]["env"][0]["value"])
        assert tf["cluster"] == {
            "worker": [f"mnist-worker-{i}.team-a.svc:2222" for i in range(3)],
            "ps": [f"mnist-ps-{i}.team-a.svc:2222" for i in range(2)]}
        role, index = name.split("-")[1], int(name.split("-")[2])
        assert tf["task"] == {"type": role, "index": index}
        assert services[name]["spec"]["selector"]["training.kubeflow.org/replica-index"] == str(index)


def test_extrapolated_sizes_agree_with_generated_ones():
    # Long names: each pod outgrows gzip's 32 KiB window at few workers, as every pod does
    # where the bench extrapolates (past its byte budget).
    name, ns = "a-rather-long-cluster-name-for-tests", "a-long-namespace-name-for-the-bench"
    exact = baseline.measure(name, ns, 400, 4)
    sampled = baseline.measure(name, ns, 400, 4, budget=2 << 20)
    assert exact.exact and not sampled.exact
    assert exact.objects == sampled.objects == 2 * 404
    assert abs(sampled.bytes - exact.bytes) / exact.bytes < 0.01
    assert abs(sampled.stored - exact.stored) / exact.stored < 0.05
    assert abs(sampled.largest - exact.largest) < 10


def test_bad_sizes_are_refused():
    r = subprocess.run([sys.executable, str(BENCH / "baseline.py"), "x", "-w", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--workers must be at least 1" in r.stderr
