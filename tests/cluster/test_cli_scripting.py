"""The scriptable CLI against the local cluster: `tfhelm list`, `status -o json|yaml`,
`--kube-context`/`--kubeconfig`, and plain output when stdout is not a terminal."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import yaml
from kubernetes import client, config as kconfig

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


SLOW = {"worker": {"podAnnotations": {"tfhelm.io/kwok-complete-after": "1h"}}}  # Running until patched
NO_STORAGE = {"storage": {"data": {"enabled": False}, "logs": {"enabled": False}}}


def values_files(tmp_path, *values: dict) -> list[str]:
    """`-f FILE` per values dict (later ones win, as with helm)."""
    args = []
    for i, v in enumerate(values):
        (tmp_path / f"values-{i}.yaml").write_text(yaml.safe_dump(v))
        args += ["-f", str(tmp_path / f"values-{i}.yaml")]
    return args


def test_up_wait_reports_the_outcome_and_that_kwok_ran_the_pods(namespace, tmp_path):
    """`up --wait` follows the Jobs' counters (one plain line per change on a pipe) and never
    claims a training the simulated nodes did not run; a failed training is exit 1."""
    ok = tfhelm("up", "--name", "ok", "-n", namespace, "--workers", "3", "--ps", "1", "--wait",
                "--timeout", "180", *values_files(tmp_path, NO_STORAGE))
    progress = [ln for ln in ok.stderr.splitlines() if ln.startswith(f"tasks of {namespace}/ok started: ")]
    assert progress and progress[-1].endswith(", worker tasks succeeded: 3/3"), ok.stderr
    assert all(a != b for a, b in zip(progress, progress[1:]))  # a line per change, not per poll
    assert "Jobs complete on simulated (kwok) nodes: no container ran, nothing was trained" in ok.stderr
    assert "training complete" not in ok.stderr

    failing = {"worker": {"backoffLimitPerIndex": 0, "podLabels": {"tfhelm.io/kwok-fail": "true"}}}
    bad = tfhelm("up", "--name", "bad", "-n", namespace, "--workers", "2", "--ps", "0", "--wait",
                 "--timeout", "180", *values_files(tmp_path, NO_STORAGE, failing), code=1)
    assert "Jobs failed on simulated (kwok) nodes: no container ran, nothing was trained" in bad.stderr
    assert "worker tasks succeeded: 0/2" in bad.stderr


def plain_table(lines: list[str], header: str) -> list[dict]:
    """The task or role rows under a plain-columns header line starting with `header`
    (cells may be blank, so they are cut at the header's column offsets)."""
    at = next(i for i, ln in enumerate(lines) if ln.startswith(header + " "))
    names = lines[at].split()
    starts = [lines[at].index(f" {n} " if i < len(names) - 1 else f" {n}") + 1 if i else 0
              for i, n in enumerate(names)]
    rows = []
    for ln in lines[at + 1:]:
        if not re.match(r"(chief|worker|ps|evaluator)(:\d+)? ", ln):
            break
        rows.append({n: ln[a:b].strip() for n, a, b in zip(names, starts, starts[1:] + [len(ln)])})
    return rows


def test_status_summarizes_a_cluster_larger_than_the_full_listing(namespace, core, tmp_path):
    """Beyond 20 tasks the table shows the Jobs, the tasks per role and phase, then only the
    exceptions; `--tasks` and `-o json` still list every task."""
    # The failed task stays failed (no replacement pod) and the others go on (maxFailedIndexes).
    once = {"worker": {"backoffLimitPerIndex": 0, "maxFailedIndexes": 23}}
    tfhelm("up", "--name", "big", "-n", namespace, "--workers", "24", "--ps", "1",
           *values_files(tmp_path, NO_STORAGE, SLOW, once))
    sel = "tfhelm.io/cluster=big,tfhelm.io/role=worker"
    running = wait_for(lambda: (lambda ps: ps if len(ps) == 24 else None)(
        [p for p in core.list_namespaced_pod(namespace, label_selector=sel).items if p.status.phase == "Running"]),
        90, what="24 running workers")
    victim = next(p for p in running if p.metadata.annotations["batch.kubernetes.io/job-completion-index"] == "7")
    core.patch_namespaced_pod(victim.metadata.name, namespace, {"metadata": {
        "labels": {"tfhelm.io/kwok-fail": "true"}, "annotations": {"tfhelm.io/kwok-complete-after": "100ms"}}})
    wait_for(lambda: core.read_namespaced_pod(victim.metadata.name, namespace).status.phase == "Failed", 60,
             what="worker 7 failed")
    batch, job = client.BatchV1Api(core.api_client), job_of(namespace, "big", "worker")
    wait_for(lambda: batch.read_namespaced_job(job, namespace).status.failed, 60,
             what="the Job controller's count of the failure")  # a moment after the pod's phase

    lines = tfhelm("status", "big", "-n", namespace).stdout.splitlines()
    assert lines[0].startswith(f"job {job_of(namespace, 'big', 'worker')}: 0/24 succeeded, 1 failed"), lines
    counts = {r["ROLE"]: r for r in plain_table(lines, "ROLE")}
    assert counts["worker"]["FAILED"] == "1" and counts["ps"]["RUNNING"] == "1", lines
    odd = plain_table(lines, "TASK")
    assert [(r["TASK"], r["POD"], r["PHASE"].split()[0]) for r in odd] == [
        ("worker:7", victim.metadata.name, "Failed")], lines  # the healthy tasks are only counted
    assert any(ln.startswith("parameter servers: 1 parameter server(s)") for ln in lines)

    every = tfhelm("status", "big", "-n", namespace, "--tasks").stdout.splitlines()
    tasks = plain_table(every, "TASK")
    assert {r["TASK"] for r in tasks} == {f"worker:{i}" for i in range(24)} | {"ps:0"}
    report = json.loads(tfhelm("status", "big", "-n", namespace, "-o", "json").stdout)
    assert sorted((t["task"], t["pod"]) for t in report["tasks"]) == sorted((r["TASK"], r["POD"]) for r in tasks)
    assert report["phases"]["worker"]["Failed"] == 1 and report["training"] == "Running"
