"""Scriptable output: plain columns, -o json|yaml data, `tfhelm list` rows, log prefixes,
the GitOps values, the kube context shared with Helm, --version and `python -m tfhelm`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from typer.testing import CliRunner

from tfhelm.cli import app
from tfhelm.cluster import gitops, report, tasklogs
from tfhelm.cluster.deploy import plan
from tfhelm.cluster.values import ClusterOptions
from tfhelm.errors import SpecError
from tfhelm.kubeconfig import current_namespace, load_config
from tfhelm.output import plain_columns

REPO = Path(__file__).resolve().parents[2]
CHART = {"helm.sh/chart": "tf-cluster-0.4.0"}  # every object of the tf-cluster chart


def job(cluster, role, ns="team-a", total=2, succeeded=0, complete=False, generation="",
        created=None, deleting=False):
    conds = [k8s.V1JobCondition(type="Complete", status="True")] if complete else []
    return k8s.V1Job(
        metadata=k8s.V1ObjectMeta(name=f"{cluster}-{role}" + (f"-{generation}" if generation else ""), namespace=ns,
                                  creation_timestamp=created, deletion_timestamp=created if deleting else None,
                                  labels={"tfhelm.io/cluster": cluster, "tfhelm.io/role": role, **CHART}),
        spec=k8s.V1JobSpec(completions=total, template=k8s.V1PodTemplateSpec(
            spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="tensorflow")]))),
        status=k8s.V1JobStatus(conditions=conds, succeeded=succeeded))


def ps(cluster, i, ns="team-a", ready=1):
    return k8s.V1Deployment(
        metadata=k8s.V1ObjectMeta(name=f"{cluster}-ps-{i}", namespace=ns,
                                  labels={"tfhelm.io/cluster": cluster, "tfhelm.io/role": "ps", **CHART}),
        spec=k8s.V1DeploymentSpec(selector=k8s.V1LabelSelector(), template=k8s.V1PodTemplateSpec()),
        status=k8s.V1DeploymentStatus(ready_replicas=ready))


def pod(name, role, index, phase="Running"):
    """A pod as the API's JSON (what `cluster.objects.task_pods` yields)."""
    return {"metadata": {"name": name, "labels": {"tfhelm.io/role": role, "tfhelm.io/task-index": str(index)}},
            "spec": {"nodeName": "n1"}, "status": {"phase": phase}}


def test_plain_columns_keep_long_names_whole():
    long = "a-very-long-cluster-name-that-a-terminal-table-would-cut-" + "x" * 60
    text = plain_columns(("NAME", "PS"), [(long, "1/1"), ("b", "0/2")])
    lines = text.splitlines()
    assert lines[1].split() == [long, "1/1"]
    assert lines[0].index("PS") == lines[2].index("0/2")  # aligned
    assert not re.search(r"[\u2500-\u257f\u2800-\u28ff]", text)  # no box drawing, no spinner


def test_cluster_rows_group_by_namespace_and_cluster():
    jobs = [job("mnist", "worker", succeeded=2, complete=True), job("big", "worker", total=8, succeeded=3),
            job("big", "chief", total=1), job("other", "worker", ns="team-b")]
    deps = [ps("mnist", 0, ready=0), ps("big", 0), ps("big", 1), ps("serving", 0)]
    rows = {(r.namespace, r.name): r for r in report.cluster_rows(jobs, deps)}
    assert set(rows) == {("team-a", "mnist"), ("team-a", "big"), ("team-b", "other"), ("team-a", "serving")}
    assert (rows["team-a", "mnist"].workers, rows["team-a", "mnist"].ps) == ("2/2", "0/1")
    assert rows["team-a", "mnist"].training == "Complete"
    big = rows["team-a", "big"]
    assert (big.workers, big.ps, big.chief, big.training) == ("3/8", "2/2", True, "Running")
    assert rows["team-a", "serving"].training == "Serving"


def test_cluster_rows_are_tf_cluster_charts_only():
    """Another chart's Job that happens to carry the `tfhelm.io/cluster` label is no TF cluster."""
    foreign = job("etl", "worker")
    foreign.metadata.labels["helm.sh/chart"] = "spark-jobs-1.2.0"
    unlabelled = ps("web", 0)
    del unlabelled.metadata.labels["helm.sh/chart"]
    rows = report.cluster_rows([foreign, job("mnist", "worker")], [unlabelled])
    assert [r.name for r in rows] == ["mnist"]


def test_cluster_rows_count_the_current_generation():
    """Mid-upgrade the old Job (finished, being deleted) lingers beside the new one."""
    t0, t1 = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 2, tzinfo=timezone.utc)
    jobs = [job("m", "worker", total=2, succeeded=2, complete=True, generation="000aaa", created=t0, deleting=True),
            job("m", "worker", total=5, succeeded=1, generation="fff111", created=t1)]  # sorts after the old one
    (row,) = report.cluster_rows(jobs, [])
    assert (row.workers, row.training) == ("1/5", "Running")


def test_status_report_is_plain_data():
    tasks = report.task_rows([pod("m-ps-0-y", "ps", 0), pod("m-worker-0-x", "worker", 0)])
    data = report.report("team-a", "m", tasks, [job("m", "worker")], [ps("m", 0)], [])
    assert json.loads(json.dumps(data)) == data
    assert [t["task"] for t in data["tasks"]] == ["worker:0", "ps:0"]
    assert data["tasks"][0] == {"task": "worker:0", "pod": "m-worker-0-x", "phase": "Running", "restarts": 0,
                                "node": "n1", "reason": "", "error": ""}
    assert data["phases"] == {"worker": {"Running": 1}, "ps": {"Running": 1}}
    assert data["parameterServers"] == {"total": 1, "ready": 1}
    assert data["training"] == "Running" and data["jobs"][0]["name"] == "m-worker"


def failed_fetch(name: str, index: int, url: str = "http://files/train.py") -> dict:
    """A worker pod whose code fetch failed: the message is the end of the init log
    (terminationMessagePolicy: FallbackToLogsOnError)."""
    p = pod(name, "worker", index, phase="Failed")
    p["status"]["initContainerStatuses"] = [{"name": "fetch-code", "state": {"terminated": {
        "exitCode": 1, "reason": "Error", "message": f"some output\nfetch {url}: HTTP Error 404: Not Found\n"}}}]
    p["status"]["containerStatuses"] = [{"name": "tensorflow", "state": {"waiting": {"reason": "PodInitializing"}}}]
    return p


def test_a_failed_fetch_is_named_with_its_url_and_http_status():
    rows = report.task_rows([failed_fetch("w0", 0), failed_fetch("w1", 1), pod("p0", "ps", 0)])
    assert (rows[0].phase, rows[0].reason) == ("Failed", "Init:Error")
    assert rows[0].error == "fetch-code: fetch http://files/train.py: HTTP Error 404: Not Found (exit 1)"
    assert rows[2].error == ""
    assert report.error_lines(rows) == [
        "error of worker:0, worker:1: fetch-code: fetch http://files/train.py: HTTP Error 404: Not Found (exit 1)"]
    # The init container's log is shown; the task container never ran, so it has none.
    assert tasklogs.log_containers(failed_fetch("w0", 0)) == ["fetch-code"]
    assert tasklogs.log_containers(pod("p0", "ps", 0)) == ["tensorflow"]
    crashed = pod("w2", "worker", 2)
    crashed["status"]["containerStatuses"] = [{"name": "tensorflow", "state": {"waiting": {
        "reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": 2}}}]
    assert report.task_row(crashed).error == "no message (exit 2)"
    assert tasklogs.log_containers(crashed) == ["tensorflow"]


def test_log_lines_are_prefixed_and_aligned():
    assert tasklogs.prefixed("worker:3", "step 1\nstep 2\n", width=12) == ["[worker-3]  step 1", "[worker-3]  step 2"]
    assert tasklogs.prefixed("ps:0", "") == []


def test_gitops_values_turn_the_reaper_on_in_the_workload_release_only():
    p = plan(ClusterOptions(name="mnist", namespace="team-a", workers=4, ps=2))
    by_name = {r.name: r.values for r in gitops.releases(p)}
    assert by_name["mnist"]["reaper"]["enabled"] is True
    assert "reaper" not in by_name["mnist-ps"]
    no_ps = plan(ClusterOptions(name="mwm", workers=2, ps=0))
    assert all("reaper" not in r.values for r in gitops.releases(no_ps))
    kept_off = plan(ClusterOptions(name="m", workers=2, ps=1, value_files=[{"reaper": {"enabled": False}}]))
    assert all(r.values.get("reaper", {}).get("enabled") is not True for r in gitops.releases(kept_off))


def test_render_values_only_prints_what_the_gitops_recipe_needs(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    result = CliRunner().invoke(app, ["render", "mnist", "--workers", "4", "--ps", "1", "--values-only"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [(d["components"], d.get("reaper", {}).get("enabled")) for d in docs] == [("ps", None), ("workload", True)]


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: one, context: {cluster: c, user: u, namespace: ns-one}}
- {name: two, context: {cluster: c, user: u, namespace: ns-two}}
current-context: one
"""


def test_kube_context_picks_the_namespace_and_is_shared_with_helm(monkeypatch, tmp_path):
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(cfg))
    monkeypatch.delenv("HELM_KUBECONTEXT", raising=False)
    assert current_namespace() == "ns-one"
    monkeypatch.setenv("HELM_KUBECONTEXT", "two")  # what --kube-context sets, and Helm reads
    assert current_namespace() == "ns-two"
    monkeypatch.setenv("HELM_KUBECONTEXT", "three")
    with pytest.raises(SpecError, match="--kube-context: no context 'three'.*one, two"):
        current_namespace()
    with pytest.raises(SpecError, match="--kube-context"):  # also before any API call (-n given)
        load_config()


def test_global_kube_options_reach_the_environment(monkeypatch, tmp_path):
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(KUBECONFIG)
    for var in ("KUBECONFIG", "HELM_KUBECONTEXT"):  # unset, and restored after what the command sets
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    result = CliRunner().invoke(app, ["--kubeconfig", str(cfg), "--kube-context", "nope", "list"])
    assert result.exit_code == 2
    assert "--kube-context: no context 'nope'" in result.output


def test_bad_output_format_is_a_usage_error(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    result = CliRunner().invoke(app, ["status", "x", "-o", "xml"])
    assert result.exit_code == 2 and "--output: 'xml' is not a format" in result.output


def test_version_and_python_dash_m():
    from importlib.metadata import version

    for cmd in ([sys.executable, "-m", "tfhelm", "--version"], [str(Path(sys.executable).parent / "tfhelm"), "--version"]):
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        assert res.stdout.startswith(f"tfhelm {version('tfhelm')} (charts: tf-cluster ")


def test_helm_version_is_the_one_the_makefile_builds():
    from tfhelm.helm import HELM_VERSION

    pinned = re.search(r"^HELM_VERSION\s*:=\s*(\S+)", (REPO / "mk/versions.mk").read_text(), re.M).group(1)
    assert HELM_VERSION == pinned


def test_a_cluster_whose_jobs_were_deleted_is_named_so_not_serving():
    """The PS say which roles' Jobs the cluster has (chart annotation): one gone is named."""
    serving = ps("m", 0)
    serving.metadata.annotations = {report.JOB_ROLES_ANNOTATION: "chief,worker"}
    (row,) = report.cluster_rows([job("m", "chief", total=1)], [serving])
    assert row.training == "Deleted (worker Job)"
    assert report.gone_jobs([], [serving]) == ["chief", "worker"]
    data = report.report("team-a", "m", [], [], [serving], [], gone=report.gone_jobs([], [serving]))
    assert (data["training"], data["goneJobs"]) == ("Deleted", ["chief", "worker"])
    assert report.cluster_rows([], [ps("older", 0)])[0].training == "Serving"  # a chart without the annotation


def test_what_the_cluster_says_reaches_the_terminal_escaped(capsys):
    """A script's error, a log line, a Lease's holder: anyone's text; the terminal shows it and
    never acts on it (no title change, no screen clear, no reordering)."""
    from tfhelm.console import fail_line, printable

    assert printable("a\tb\x1b]0;owned\x07\r\x9b\u202eend\n") == "a\tb\\x1b]0;owned\\x07\\x0d\\x9b\\u202eend\n"
    hostile = pod("m-worker-0-x", "worker", 0, phase="Failed")
    hostile["status"]["containerStatuses"] = [{"name": "tensorflow", "state": {"terminated": {
        "exitCode": 1, "message": "ValueError: \x1b[2J\x1b]0;owned\x07gotcha"}}}]
    tasks = report.task_rows([hostile])
    from tfhelm.api.status import Status
    from tfhelm.commands.status import print_table

    print_table(Status.from_report(report.report("team-a", "m", tasks, [job("m", "worker")], [], [])))
    fail_line("held by \x1b]0;owned\x07mallory")
    shown = capsys.readouterr()
    assert "\x1b]0;owned" not in shown.out + shown.err and "\x1b[2J" not in shown.out
    assert "ValueError: \\x1b[2J\\x1b]0;owned\\x07gotcha (exit 1)" in shown.out
    assert "held by \\x1b]0;owned\\x07mallory" in shown.err
