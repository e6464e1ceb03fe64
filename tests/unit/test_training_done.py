"""The one training-done rule (training.py) with the pods: Complete as soon as the Job says
so early or every index of the decisive Job has a Succeeded pod; failure stays the Job
controller's. And the reaper's loop and `up --wait` deciding at the pod event."""

from __future__ import annotations

import queue
import threading

import pytest
from kubernetes import client as k8s
from rich.console import Console

from tfhelm import reaper
from tfhelm.cluster import progress, report, training
from tfhelm.cluster.spec import Shape
from tfhelm.errors import TimedOut
from tfhelm.reaper import REAP, default_config

from tests.unit.test_reaper import T0, FakeClient, fast, job, pod_meta, rows, tasks, wait_until


def cond(j: k8s.V1Job, kind: str, reason: str | None = None) -> k8s.V1Job:
    j.status.conditions = [k8s.V1JobCondition(type=kind, status="True", last_transition_time=T0, reason=reason)]
    return j


# ----------------------------------------------------------------------------- the Job's early word

def test_the_jobs_early_conditions_decide():
    early = training.job_row(cond(job(succeeded=2), "SuccessCriteriaMet"))
    assert (early.state, early.finished_at) == ("Complete", T0)
    target = training.job_row(cond(job(failed=1), "FailureTarget", "PodFailurePolicy"))
    assert (target.state, target.reason, target.finished_at) == ("Failed", "PodFailurePolicy", T0)
    counted = training.job_row(job(succeeded=2))  # counted, no condition written yet
    assert counted.state == "Complete" and counted.finished_at is None
    assert training.job_row(job(succeeded=1)).state == "Running"


# ----------------------------------------------------------------------------- the pods

def test_every_index_with_a_succeeded_pod_is_complete():
    j = job(total=3, succeeded=0)
    assert training.training_done(rows(j), pods=tasks(j, 0, 2)) is None
    assert training.training_done(rows(j), pods=tasks(j, 0, 1, 2)) == "Complete"
    assert training.training_state(rows(j), tasks(j, 0, 1, 2)) == "Complete"
    assert training.training_done(rows(j)) is None, "without pods: the Job's word only"


def test_a_task_counts_once_and_only_for_its_own_job():
    j = job(total=2)
    seen = tasks(j, 0)
    assert seen.add(pod_meta(j, 0)) is False, "a second pod of index 0 tells nothing new"
    old_generation = job(total=2, uid="uid-old")
    seen.add(pod_meta(old_generation, 1))
    assert training.training_done(rows(j), pods=seen) is None
    assert seen.add({"name": "stray", "annotations": {training.COMPLETION_INDEX: "1"}}) is False, "no owner"
    # The Job controller's label names the owner too.
    seen.add({"name": "p", "labels": {training.CONTROLLER_UID: j.metadata.uid,
                                      training.COMPLETION_INDEX: "1"}})
    assert training.training_done(rows(j), pods=seen) == "Complete"


def test_only_succeeded_pods_are_noted():
    j = job(total=1)
    seen = training.SucceededTasks()
    assert seen.note({"metadata": pod_meta(j, 0), "status": {"phase": "Failed"}})["status"]
    assert seen.count(j.metadata.uid) == 0
    seen.note({"metadata": pod_meta(j, 0), "status": {"phase": "Succeeded"}})
    assert seen.count(j.metadata.uid) == 1


def test_failure_stays_the_job_controllers():
    j = job(total=2, failed=1)
    assert training.training_done(rows(j), pods=tasks(j, 1)) is None, "a failed pod alone decides nothing"
    failed = cond(job(total=2, failed=1), "Failed", "DeadlineExceeded")
    assert training.training_done(rows(failed), pods=tasks(failed, 0, 1)) == "Failed", "the Job's word first"
    target = cond(job(total=2), "FailureTarget", "PodFailurePolicy")
    assert training.training_done(rows(target), pods=tasks(target, 0, 1)) == "Failed"


def test_worker_0_and_chief_from_the_pods():
    w = job(total=4)
    assert training.training_done(rows(w), "worker-0", tasks(w, 1, 2, 3)) is None
    assert training.training_done(rows(w), "worker-0", tasks(w, 0)) == "Complete"
    chief, workers = job(role="chief", total=1), job(total=2)
    both = rows(chief, workers)
    assert training.training_done(both, pods=tasks(workers, 0, 1)) is None, "auto: the chief decides"
    assert training.training_done(both, "all-workers", tasks(workers, 0, 1)) == "Complete"
    assert training.training_done(both, pods=tasks(chief, 0)) == "Complete"
    assert training.training_done(both, "chief", tasks(chief, 0)) == "Complete"


def test_a_suspended_job_is_not_complete_by_its_pods():
    j = job(total=1, suspended=True)
    assert training.training_done(rows(j), pods=tasks(j, 0)) is None


def test_status_and_list_apply_the_rule():
    j = job("m", total=2)
    j.metadata.labels["helm.sh/chart"] = "tf-cluster-1.0.0"
    j.metadata.namespace = "ns"
    (row,) = report.cluster_rows([j], [], tasks(j, 0, 1))
    assert (row.workers, row.training) == ("2/2", "Complete")
    data = report.report("ns", "m", [], [j], [], [], tasks(j, 0, 1))
    assert data["training"] == "Complete" and data["jobs"][0]["state"] == "Complete"
    assert data["jobs"][0]["succeeded"] == 2


# ----------------------------------------------------------------------------- the reaper

def test_the_reaper_decides_at_the_last_pod_event():
    running = job(total=3)
    fc = FakeClient(running)
    r = reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast())
    box = {}
    t = threading.Thread(target=lambda: box.update(result=r.run()), daemon=True)
    t.start()
    fc.succeed(running, 0, 1)
    fc.succeed(running, 1)  # a second pod of index 1
    t.join(0.3)
    assert t.is_alive(), "two of three tasks: still waiting"
    fc.succeed(running, 2)  # the Job is never told: the pods decide
    t.join(10)
    assert box["result"].action == REAP and box["result"].outcome == "Complete"
    assert fc.pod_selectors == ["tfhelm.io/cluster=c,tfhelm.io/role in (chief,worker)"]


def test_the_reaper_lists_succeeded_pods_at_start():
    running = job(total=2)
    fc = FakeClient(running)
    fc.pods = {m["name"]: m for m in (pod_meta(running, 0), pod_meta(running, 1))}
    assert reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast()).run().outcome == "Complete"


def test_without_access_to_pods_the_jobs_decide():
    fc = FakeClient(job(), pods_forbidden=True)
    lines: list[str] = []
    r = reaper.Reaper(fc, "ns", "c", default_config(grace=0), backoff=(0.01, 0.05), log_line=lines.append)
    box = {}
    t = threading.Thread(target=lambda: box.update(result=r.run()), daemon=True)
    t.start()
    fc.push("MODIFIED", job(state="Complete", succeeded=2))
    t.join(10)
    assert box["result"].action == REAP
    assert any("no read access to pods" in ln for ln in lines), lines
    assert not any("unreachable" in ln or "forbidden" in ln.lower() for ln in lines), lines


# ----------------------------------------------------------------------------- up --wait

class FakeKube:
    """The Kube methods `wait_for_training` uses; `send()` delivers a watch event."""

    def __init__(self, jobs: list[k8s.V1Job], ps_ready: int = 1):
        as_json = k8s.ApiClient().sanitize_for_serialization
        dep = {"metadata": {"uid": "d1", "name": "c-ps-0", "labels": {"tfhelm.io/role": "ps"}},
               "status": {"readyReplicas": ps_ready}}
        self.items = {"jobs": [as_json(j) for j in jobs], "deployments": [dep], "pods": []}
        self.queues = {kind: queue.Queue() for kind in self.items}

    def send(self, kind: str, event: str, obj: dict) -> None:
        self.queues[kind].put((event, obj, "2"))

    KINDS = {"Job": "jobs", "Deployment": "deployments", "Pod": "pods"}

    def listing(self, kind, namespace, selector, **options):
        return self.items[self.KINDS[kind]], "1"

    def watch(self, watches, kind, namespace, selector, rv, timeout, **options):
        q = self.queues[self.KINDS[kind]]
        while not watches.stopped:
            try:
                yield q.get(timeout=0.02)
            except queue.Empty:
                continue

    def succeeded_pods(self, namespace, selector):
        return self.listing("Pod", namespace, selector)

    def watch_succeeded_pods(self, watches, namespace, selector, rv, timeout):
        return self.watch(watches, "Pod", namespace, selector, rv, timeout)

    def each(self, kind, namespace, selector=None, *, fields=None, **options):
        """Where the pods ran (objects.ran_only_on_simulated_nodes asks at the end): on a
        kwok node."""
        if kind == "Node":
            return iter([{"metadata": {"name": "kwok-0", "annotations": {"kwok.x-k8s.io/node": "fake"}}}])
        return iter([] if "spec.nodeName!=kwok-0" in fields else [{"metadata": {"name": "c-worker-0"}}])


def plain_console():
    import io

    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=200), out


def test_up_wait_decides_at_the_last_pod_event_and_shows_progress():
    running = job(total=2)
    kube = FakeKube([running])
    console, out = plain_console()
    box = {}
    t = threading.Thread(target=lambda: box.update(result=progress.wait_for_training(
        kube, "ns", "c", Shape(workers=2, ps=1), console, timeout=30)), daemon=True)
    t.start()
    wait_until(lambda: "worker tasks succeeded: 0/2" in out.getvalue())
    kube.send("pods", "ADDED", {"metadata": pod_meta(running, 0)})
    wait_until(lambda: "worker tasks succeeded: 1/2" in out.getvalue())
    assert t.is_alive()
    kube.send("pods", "ADDED", {"metadata": pod_meta(running, 1)})
    t.join(10)
    assert box["result"] == ("Complete", True)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "tasks of ns/c started: 1/3, worker tasks succeeded: 2/2", lines


def test_up_wait_follows_the_job_and_honours_the_timeout():
    kube = FakeKube([job(total=2)])
    console, _ = plain_console()
    with pytest.raises(TimedOut, match="--timeout"):
        progress.wait_for_training(kube, "ns", "c", Shape(workers=2, ps=1), console, timeout=0.3)
    failed = FakeKube([job(total=2)])
    box = {}
    t = threading.Thread(target=lambda: box.update(result=progress.wait_for_training(
        failed, "ns", "c", Shape(workers=2, ps=1), console, timeout=30)), daemon=True)
    t.start()
    failed.send("jobs", "MODIFIED", k8s.ApiClient().sanitize_for_serialization(job(state="Failed", failed=2)))
    t.join(10)
    assert box["result"] == ("Failed", True)
