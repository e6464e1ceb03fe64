"""The scriptable CLI against the local cluster: `tfhelm list`, `status -o json|yaml`,
`--kube-context`/`--kubeconfig`, and plain output when stdout is not a terminal."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml
from kubernetes import config as kconfig

from tfhelm.chart import chart_path
from tfhelm.helm import helm_executable

from .conftest import job_of, wait_for


def helm_cluster(name: str, namespace: str, workers: int, ps: int) -> None:
    """A TF cluster installed by plain Helm in one release (list/status/logs find clusters
    however they were installed), waited for until its worker Job is complete."""
    res = subprocess.run([helm_executable(), "install", name, str(chart_path()), "-n", namespace,
                          "--set", f"worker.replicas={workers}", "--set", f"ps.replicas={ps}",
                          "--wait", "--wait-for-jobs", "--timeout", "3m"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def tfhelm(*args: str, code: int = 0) -> subprocess.CompletedProcess:
    """The real console script in a subprocess: stdout is a pipe, as in a script."""
    res = subprocess.run([sys.executable, "-m", "tfhelm", *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == code, res.stdout + res.stderr
    return res


def test_list_and_status_for_scripts(namespace, kubeconfig):
    long = "cluster-name-long-enough-to-be-cut-by-tables"  # 44 characters, the most a name has
    helm_cluster(long, namespace, workers=2, ps=1)
    tfhelm("up", "--name", "second", "-n", namespace, "--workers", "1", "--ps", "0")

    rows = json.loads(tfhelm("list", "-n", namespace, "-o", "json").stdout)
    by_name = {r["name"]: r for r in rows}
    assert set(by_name) == {long, "second"}
    assert by_name[long] | {"ps": None} == {"namespace": namespace, "name": long, "workers": "2/2", "ps": None,
                                            "chief": False, "training": "Complete"}
    assert by_name[long]["ps"].endswith("/1")
    everywhere = yaml.safe_load(tfhelm("list", "-A", "-o", "yaml").stdout)
    assert {(r["namespace"], r["name"]) for r in everywhere} >= {(namespace, long), (namespace, "second")}

    plain = tfhelm("list", "-n", namespace).stdout
    assert plain.splitlines()[0].split() == ["NAMESPACE", "NAME", "WORKERS", "PS", "CHIEF", "TRAINING"]
    assert any(line.split()[:3] == [namespace, long, "2/2"] for line in plain.splitlines())
    assert not any(ch in plain for ch in "━│┃╭…⠋")  # no table glyphs, spinner or ellipsis

    status = json.loads(tfhelm("status", long, "-n", namespace, "-o", "json").stdout)
    assert status["training"] == "Complete" and status["namespace"] == namespace
    assert sorted(t["task"] for t in status["tasks"]) == ["ps:0", "worker:0", "worker:1"]
    assert {j["name"]: (j["succeeded"], j["total"], j["state"]) for j in status["jobs"]} == {
        job_of(namespace, long, "worker"): (2, 2, "Complete")}
    text = tfhelm("status", long, "-n", namespace).stdout
    pod_lines = [ln for ln in text.splitlines() if ln.startswith("worker:")]
    assert len(pod_lines) == 2 and all(ln.split()[1].startswith(f"{long}-worker-") for ln in pod_lines)


def test_kube_context_and_kubeconfig_options(namespace, kubeconfig, monkeypatch, tmp_path):
    contexts, active = kconfig.list_kube_config_contexts(config_file=str(kubeconfig))
    monkeypatch.delenv("KUBECONFIG")
    tfhelm("--kubeconfig", str(kubeconfig), "up", "--name", "ctx", "-n", namespace, "--workers", "1",
           "--ps", "0")
    wait_for(lambda: json.loads(tfhelm("--kubeconfig", str(kubeconfig), "--kube-context", active["name"],
                                       "list", "-n", namespace, "-o", "json").stdout), 30, what="listed")
    bad = tfhelm("--kubeconfig", str(kubeconfig), "--kube-context", "no-such-context", "list", "-n", namespace, code=2)
    assert "--kube-context: no context 'no-such-context'" in bad.stderr
    none = tfhelm("--kubeconfig", str(tmp_path / "absent"), "list", "-n", namespace, code=3)
    assert "no reachable Kubernetes cluster" in none.stderr


def test_logs_covers_every_task_in_status_order(namespace):
    """Every task appears, prefixed, in status order: its log on stdout, or (a pod whose
    node serves no log, like kwok's here) one note on stderr. Never a traceback."""
    helm_cluster("lg", namespace, workers=2, ps=1)
    res = tfhelm("logs", "lg", "-n", namespace)
    seen = [line.split("]")[0] + "]" for line in (res.stdout + res.stderr).splitlines() if line.startswith("[")]
    assert list(dict.fromkeys(seen)) == ["[worker-0]", "[worker-1]", "[ps-0]"], res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    missing = tfhelm("logs", "nope", "-n", namespace, code=2)
    assert "no task pods of TF cluster 'nope'" in missing.stderr
