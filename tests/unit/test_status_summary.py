"""`tfhelm status` at scale: pods read as the API's JSON, a large cluster summarized (counts
per role and phase, then the exceptions), a small one listed task by task; and the
progress of `up --wait` from the controllers' counters, not from the pods."""

from __future__ import annotations

from datetime import datetime, timezone

from kubernetes import client as k8s

from tfhelm.api import Status
from tfhelm.cluster import progress, report, training
from tfhelm.commands import status
from tfhelm.jsonobject import JsonObject

from .test_cli_output import job, ps


def pod(role, index, phase="Running", restarts=0, waiting="", deleting=False, node="n1"):
    """A task pod as the API's JSON (what `cluster.objects.task_pods` yields)."""
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    meta = {"name": f"m-{role}-{index}-x", "labels": {"tfhelm.io/role": role}}
    if role == "worker":  # Indexed Job pods carry their index as an annotation
        meta["annotations"] = {report.COMPLETION_INDEX: str(index)}
    else:
        meta["labels"]["tfhelm.io/task-index"] = str(index)
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": phase, "containerStatuses": [
                {"name": "tensorflow", "restartCount": restarts, "state": state}]}}


def big_cluster(workers=40):
    """40 workers (3 unwell: pending, crash-looping, failed), 2 PS, one reaper pod."""
    pods = [pod("worker", i, "Succeeded") for i in range(workers)]
    pods[5] = pod("worker", 5, "Pending", waiting="ImagePullBackOff")
    pods[7] = pod("worker", 7, "Running", restarts=3, waiting="CrashLoopBackOff")
    pods[9] = pod("worker", 9, "Failed")
    reaper = {"metadata": {"name": "m-reaper-x", "labels": {"tfhelm.io/role": "reaper"}}, "spec": {}, "status": {}}
    return report.task_rows([*pods, pod("ps", 1), pod("ps", 0), reaper])


def test_task_rows_read_the_api_json_in_task_order():
    rows = report.task_rows([pod("ps", 0), pod("worker", 10), pod("worker", 2, deleting=True),
                             pod("chief", 0, "Pending", waiting="ErrImagePull")])
    assert [(r.task, r.phase, r.reason) for r in rows] == [
        ("chief:0", "Pending", "ErrImagePull"), ("worker:2", "Terminating", ""), ("worker:10", "Running", ""),
        ("ps:0", "Running", "")]


def test_phase_counts_per_role_and_the_exceptions():
    rows = big_cluster()
    assert len(rows) == 42  # the reaper's pod is no task
    assert report.phase_counts(rows) == {"worker": {"Pending": 1, "Running": 1, "Succeeded": 37, "Failed": 1},
                                         "ps": {"Running": 2}}
    assert [(r.task, r.phase, r.reason, r.restarts) for r in report.exceptions(rows)] == [
        ("worker:5", "Pending", "ImagePullBackOff", 0), ("worker:7", "Running", "CrashLoopBackOff", 3),
        ("worker:9", "Failed", "", 0)]


def failed(role, index, message, code=1, container="tensorflow", name=""):
    """A task pod whose container exited `code` with this termination message."""
    p = pod(role, index, "Failed")
    p["metadata"]["name"] = name or p["metadata"]["name"]
    done = {"name": container, "state": {"terminated": {"exitCode": code, "message": message, "reason": "Error"}}}
    if container == "tensorflow":
        p["status"]["containerStatuses"] = [{**done, "restartCount": 0}]
    else:
        p["status"]["initContainerStatuses"] = [done]
        p["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    return p


def test_a_failed_task_shows_its_own_error_line():
    """The launcher's one-line reason, or (FallbackToLogsOnError) the log's last line; an init
    container is named; a crash before a restart counts too."""
    keras = "ImportError: Keras cannot be imported. Check that it is installed.\n"
    rows = report.task_rows([failed("worker", 0, keras), failed("worker", 1, "step 3\nbad data\n\n", code=3),
                             failed("chief", 0, "pip could not install x: ERROR: no x\n", container="install-packages"),
                             failed("worker", 2, "", code=137)])
    assert [(r.task, r.error) for r in rows] == [
        ("chief:0", "install-packages: pip could not install x: ERROR: no x (exit 1)"),
        ("worker:0", "ImportError: Keras cannot be imported. Check that it is installed. (exit 1)"),
        ("worker:1", "bad data (exit 3)"), ("worker:2", "no message (exit 137)")]
    crashed = pod("ps", 0, restarts=1)
    crashed["status"]["containerStatuses"][0]["lastState"] = {"terminated": {"exitCode": 1, "message": "OSError: x"}}
    assert report.task_row(crashed).error == "OSError: x (exit 1)"
    assert report.task_row(pod("worker", 3, "Succeeded")).error == ""


def test_each_distinct_error_is_shown_once_with_its_tasks(capsys):
    """Eight workers failed the same way, one of them twice (its retry); another error once."""
    same = "ModuleNotFoundError: No module named 'pandas'"
    pods = [failed("worker", i, same, name=f"w-{i}") for i in range(8)] + [failed("worker", 0, same, name="w-0b")]
    rows = report.task_rows(pods + [failed("evaluator", 0, "ValueError: no checkpoint")])
    assert report.error_lines(rows) == [
        f"error of worker:0, worker:1, worker:2 and 5 more, 9 pods: {same} (exit 1)",
        "error of evaluator:0: ValueError: no checkpoint (exit 1)"]
    many = report.task_rows([failed("worker", i, f"E{i}") for i in range(9)])
    assert report.error_lines(many)[-1] == "... 4 more distinct errors (-o json has every task's)"
    assert "error of worker:0, worker:1, worker:2 and 5 more, 9 pods" in print_table(capsys, rows)


def print_table(capsys, tasks, **kw) -> str:
    """`tfhelm status`'s table of the Status `Cluster.status()` returns."""
    data = report.report("team-a", "m", tasks, [job("m", "worker", total=40, succeeded=37)], [ps("m", 0), ps("m", 1)], [])
    status.print_table(Status.from_report(data), **kw)
    return capsys.readouterr().out


def test_a_large_cluster_is_summarized(capsys):
    text = print_table(capsys, big_cluster())
    lines = text.splitlines()
    assert lines[0] == "job m-worker: 37/40 succeeded, 0 failed — Running"
    assert lines[1].split() == ["ROLE", "TASKS", "PENDING", "RUNNING", "SUCCEEDED", "FAILED"]
    assert lines[2].split() == ["worker", "40", "1", "1", "37", "1"]
    assert lines[3].split() == ["ps", "2", "2"]
    assert lines[4] == "3 of 42 tasks not Running or Succeeded, or restarted (--tasks lists every task):"
    assert [ln.split()[0] for ln in lines[6:9]] == ["worker:5", "worker:7", "worker:9"]
    assert "Pending (ImagePullBackOff)" in lines[6] and "Running (CrashLoopBackOff)" in lines[7]
    assert "worker:0 " not in text and "worker:39" not in text  # healthy tasks are counted, not listed
    assert lines[9].startswith("parameter servers: 2 parameter server(s), 2 ready")


def test_the_exceptions_listed_are_bounded(capsys):
    tasks = report.task_rows([pod("worker", i, "Pending") for i in range(100)])
    text = print_table(capsys, tasks)
    assert "100 of 100 tasks not Running or Succeeded, or restarted, the first 20 below" in text
    listed = [ln.split()[0] for ln in text.splitlines() if ln.startswith("worker:")]
    assert listed == [f"worker:{i}" for i in range(report.EXCEPTIONS_SHOWN)]


def test_a_healthy_large_cluster_says_so(capsys):
    tasks = report.task_rows([pod("worker", i) for i in range(30)])
    text = print_table(capsys, tasks)
    assert "all 30 tasks Running or Succeeded, none restarted (--tasks lists every task)" in text
    assert "POD" not in text


def test_a_small_cluster_or_tasks_lists_every_task(capsys):
    small = report.task_rows([pod("worker", i) for i in range(report.FULL_LISTING - 2)] + [pod("ps", 0), pod("ps", 1)])
    text = print_table(capsys, small)
    assert text.splitlines()[0].split() == ["TASK", "POD", "PHASE", "RESTARTS", "NODE"]
    assert [ln.split()[0] for ln in text.splitlines()[1:21]] == [r.task for r in small]
    assert "ROLE" not in text
    every = print_table(capsys, big_cluster(), every_task=True)
    assert sum(ln.startswith(("worker:", "ps:")) for ln in every.splitlines()) == 42


def test_the_report_lists_every_task_of_a_large_cluster():
    data = report.report("team-a", "m", big_cluster(), [job("m", "worker", total=40)], [ps("m", 0)], [])
    assert len(data["tasks"]) == 42 and data["tasks"][5]["reason"] == "ImagePullBackOff"
    assert data["phases"]["worker"]["Succeeded"] == 37


def job_row(role, total, ready=0, succeeded=0, created=0, deleting=False):
    return training.JobRow(role, f"m-{role}-{created}", succeeded, 0, total, "Running", ready=ready,
                           created_at=datetime.fromtimestamp(created, timezone.utc), deleting=deleting)


def test_progress_counts_come_from_the_job_and_deployment_counters():
    jobs = [job_row("worker", 8, ready=5, succeeded=2), job_row("chief", 1, ready=1), job_row("evaluator", 1)]
    assert progress.counts(jobs, [ps("m", 0), ps("m", 1, ready=0)], "worker") == (5 + 2 + 1 + 1, 2)
    assert progress.counts(jobs, [], "chief") == (8, 0)
    # Mid-upgrade the old generation's Job (being deleted) does not count.
    old = job_row("worker", 8, ready=0, succeeded=8, created=0, deleting=True)
    assert progress.counts([old, job_row("worker", 8, ready=3, created=1)], [], "worker") == (3, 0)
    assert progress.counts([], [], "worker") == (0, 0)


def test_a_job_row_reads_the_ready_counter():
    j = k8s.V1Job(metadata=k8s.V1ObjectMeta(name="m-worker", labels={"tfhelm.io/role": "worker"}),
                  spec=k8s.V1JobSpec(completions=4, template=k8s.V1PodTemplateSpec(
                      spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="tensorflow")]))),
                  status=k8s.V1JobStatus(ready=3, succeeded=1, active=3))
    row = training.job_row(j)
    assert (row.ready, row.succeeded, row.total) == (3, 1, 4)


def test_json_objects_read_like_the_client_models():
    """status and --wait read Jobs, Deployments and Events as JSON (no client models): the
    same JobRow, PS count and reaper line as from the models."""
    t0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    j = job("m", "worker", total=4, succeeded=4, complete=True, created=t0)
    j.status.conditions[0].last_transition_time = t0
    j.status.completed_indexes, j.status.ready = "0-3", 0
    j.metadata.annotations = {training.RUNS_ANNOTATION: "server"}
    as_json = k8s.ApiClient().sanitize_for_serialization
    assert training.job_row(JsonObject(as_json(j))) == training.job_row(j)
    deps = [ps("m", 0), ps("m", 1, ready=0)]
    assert report.ps_counts([JsonObject(as_json(d)) for d in deps]) == report.ps_counts(deps) == (2, 1)
    ev = k8s.CoreV1Event(metadata=k8s.V1ObjectMeta(name="e", creation_timestamp=t0), reason="TFClusterReaped",
                         message="done", last_timestamp=t0, involved_object=k8s.V1ObjectReference(kind="Job"))
    assert report.reaper_lines([JsonObject(as_json(ev))]) == report.reaper_lines([ev]) == [
        "reaper: 2026-01-02 03:04:05 TFClusterReaped: done"]
