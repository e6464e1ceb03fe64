"""A Kueue-queued cluster (chart `queue.name`, docs/queue.md) in the pure code: the gate rule and
the reaper's loop acting on it against a scripted client, where a cluster stands (status),
the queue's options and values, its metrics."""

from __future__ import annotations

import copy
import queue
from datetime import datetime, timedelta, timezone

import pytest
from kubernetes import client as k8s

from tfhelm import reaper
from tfhelm.cluster import queue as kq
from tfhelm.cluster import training
from tfhelm.cluster.values import ClusterOptions, compute_values
from tfhelm.contract import QUEUE_GATE, QUEUE_LABEL
from tfhelm.errors import SpecError
from tfhelm.reaper import default_config, gates
from tfhelm.reaper.metrics import ReaperMetrics
from tfhelm.workspace import userspec

from .test_reaper import T0, FakeClient, fast, job, rows, run_in_thread, wait_until


def queued_job(*, suspended: bool, role="worker", suspended_at=T0, **kw) -> k8s.V1Job:
    j = job(role=role, suspended=suspended, **kw)
    j.metadata.labels[QUEUE_LABEL] = "team"
    if suspended:
        j.status.conditions = (j.status.conditions or []) + [k8s.V1JobCondition(
            type="Suspended", status="True", last_transition_time=suspended_at)]
    return j


def pod(name: str, role: str = "ps", *, gated: bool = True, phase: str = "Pending", deleting: bool = False,
        uid: str | None = None) -> dict:
    meta = {"name": name, "uid": uid or f"uid-{name}", "namespace": "ns",
            "labels": {"tfhelm.io/cluster": "c", "tfhelm.io/role": role}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    return {"metadata": meta, "spec": {"schedulingGates": [{"name": QUEUE_GATE}] if gated else []},
            "status": {"phase": phase}}


# ----------------------------------------------------------------------------- the gate rule

def test_a_pod_of_a_gated_role_is_read_with_its_gate():
    p = gates.gated_pod(pod("c-ps-0-x"))
    assert p.gated and not p.stopping and p.role == "ps" and p.cluster == "c"
    assert not gates.gated_pod(pod("c-ps-0-y", gated=False)).gated
    assert gates.gated_pod(pod("c-chief-0", "chief", phase="Succeeded")).stopping
    assert gates.gated_pod(pod("c-worker-0", "worker")) is None, "workers are Kueue's"


def test_pods_stay_gated_while_the_workers_wait_and_open_once_admitted():
    pods = [gates.gated_pod(p) for p in (pod("ps0"), pod("chief0", "chief"), pod("ps1", deleting=True))]
    waiting = rows(queued_job(suspended=True))
    assert gates.decide_gates(waiting, pods, done=False) == []
    admitted = rows(queued_job(suspended=False))
    opened = gates.decide_gates(admitted, pods, done=False)
    assert [(a.action, a.pod.name) for a in opened] == [(gates.OPEN, "ps0"), (gates.OPEN, "chief0")]
    assert "was admitted" in opened[0].why and str(opened[0]) == "open the gate of pod ps0"


def test_preempted_workers_close_the_gates_of_running_pods_by_eviction():
    running = [gates.gated_pod(pod("ps0", gated=False, phase="Running")),
               gates.gated_pod(pod("ps1-new")),  # its replacement, gated by the template
               gates.gated_pod(pod("chief0", "chief", gated=False, phase="Succeeded"))]
    closed = gates.decide_gates(rows(queued_job(suspended=True)), running, done=False)
    assert [(a.action, a.pod.name) for a in closed] == [(gates.CLOSE, "ps0")]
    # After the training: a suspended Job is the reaper stopping in-graph servers, not Kueue.
    assert gates.decide_gates(rows(queued_job(suspended=True)), running, done=True) == []


def test_the_rule_decides_per_cluster_from_the_loops_view():
    rule = gates.GateRule.of(None)
    assert rule.sources.keys() == {"gated"}
    view = reaper.protocol.View("ns", {"c": rows(queued_job(suspended=False))}, training.SucceededTasks(),
                                {"gated": {"uid-ps0": pod("ps0"), "uid-x": pod("other", "ps") | {}}})
    view.objects["gated"]["uid-x"]["metadata"] = {**view.objects["gated"]["uid-x"]["metadata"],
                                                  "labels": {"tfhelm.io/cluster": "d", "tfhelm.io/role": "ps"}}
    actions = rule.decide(view, 0.0)
    assert [(a.action, a.pod.name) for a in actions] == [(gates.OPEN, "ps0")], "cluster d has no admitted workers"


def test_no_worker_job_no_decision():
    assert gates.decide_gates(rows(job(role="chief", total=1)), [gates.gated_pod(pod("ps0"))], False) == []


# ----------------------------------------------------------------------------- the loop

class GateClient(FakeClient):
    """FakeClient with the gated roles' pods (whole, as the API's JSON) and the gate actions."""

    def __init__(self, *jobs, pods=()):
        super().__init__(*jobs)
        self.gated = {p["metadata"]["uid"]: p for p in pods}
        self._gated_q: queue.Queue = queue.Queue()

    def list_gated_pods(self, namespace, selector):
        self.calls.append(("list_gated", selector))
        return list(self.gated.values()), str(self.rv)

    def watch_gated_pods(self, namespace, selector, resource_version, timeout):
        while (item := self._gated_q.get()) is not None:
            yield item

    def stop_watch(self):
        super().stop_watch()
        self._gated_q.put(None)

    def change(self, p: dict, kind="MODIFIED"):
        self.rv += 1
        self.gated[p["metadata"]["uid"]] = p
        self._gated_q.put((kind, p, str(self.rv)))

    def open_gate(self, namespace, name):
        self.calls.append(("open", name))
        p = next(p for p in self.gated.values() if p["metadata"]["name"] == name)
        opened = copy.deepcopy(p)
        opened["spec"]["schedulingGates"] = []
        self.change(opened)
        return True

    def evict(self, namespace, name):
        self.calls.append(("evict", name))
        p = next(p for p in self.gated.values() if p["metadata"]["name"] == name)
        gone = copy.deepcopy(p)
        gone["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
        self.change(gone)
        return True

    def delete_job(self, namespace, name):
        self.calls.append(("delete_job", name))
        return True


def test_the_reaper_opens_the_gates_at_admission_and_closes_them_at_preemption():
    waiting = queued_job(suspended=True, rv="1")
    fc = GateClient(waiting, pods=[pod("ps0")])
    metrics = ReaperMetrics()
    r = reaper.Reaper(fc, "ns", "c", default_config(), forever=True, rules=[gates.GateRule.of("c")], reap=False,
                      metrics=metrics, **fast())
    t, box = run_in_thread(r)
    try:
        wait_until(lambda: ("list_gated", "tfhelm.io/cluster=c,tfhelm.io/role in (ps,chief,evaluator)") in fc.calls)
        wait_until(lambda: "c" in metrics.waiting)
        assert not [c for c in fc.calls if c[0] in ("open", "evict")], "nothing opens while the workers wait"
        fc.push("MODIFIED", queued_job(suspended=False, rv="2"))  # Kueue admitted the Workload
        wait_until(lambda: ("open", "ps0") in fc.calls)
        wait_until(lambda: not metrics.waiting and metrics.wait_count == 1)
        fc.push("MODIFIED", queued_job(suspended=True, rv="3"))  # preempted: Kueue suspends the Job
        wait_until(lambda: ("evict", "ps0") in fc.calls)
        fc.change(pod("ps0-new"), "ADDED")  # the Deployment's new pod: gated, and left so
        wait_until(lambda: "c" in metrics.waiting)
        assert fc.calls.count(("open", "ps0")) == 1 and fc.calls.count(("evict", "ps0")) == 1
        assert not [c for c in fc.calls if c == ("open", "ps0-new")]
        assert not [c for c in fc.calls if c[0] in ("delete_ps", "uninstall")], "--gates-only never reaps"
    finally:
        r.stop()
        t.join(10)
    assert "error" not in box, box


def test_in_graph_queued_workers_are_deleted_not_suspended():
    """Kueue would start a suspended Job of an admitted Workload again."""
    chief = job(role="chief", total=1, state="Complete", succeeded=1)
    workers = queued_job(suspended=False, server=True)
    fc = GateClient(chief, workers)
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast()).run()
    assert ("delete_job", "c-worker") in fc.calls and ("suspend", "c-worker") not in fc.calls
    assert any(r.startswith("deleted Job c-worker (in-graph worker servers stop") for r in res.removed), res.removed


def test_a_suspended_queued_job_is_not_done():
    """The reaper never takes a waiting or preempted cluster for a finished one, even when
    every index once succeeded before a preemption took the pods (the Job is suspended)."""
    j = queued_job(suspended=True, succeeded=0)
    assert training.training_done(rows(j)) is None
    assert training.training_state(rows(j)) == "Queued"
    assert reaper.decide("c", rows(j), default_config(), T0.timestamp()).action == reaper.WAIT
    seen = training.SucceededTasks()
    for i in (0, 1):
        seen.add({"labels": {training.CONTROLLER_UID: j.metadata.uid}, "annotations": {training.COMPLETION_INDEX: str(i)}})
    assert training.training_done(rows(j), pods=seen) is None


def test_queue_metrics():
    m = ReaperMetrics()
    m.queued({"c": 1767268800.0})
    m.admitted(42)
    text = m.render()
    assert 'tfhelm_queue_waiting_since_seconds{cluster="c"} 1767268800' in text
    assert 'tfhelm_queue_wait_seconds_bucket{le="60"} 1' in text and 'tfhelm_queue_wait_seconds_bucket{le="30"} 0' in text
    assert "tfhelm_queue_wait_seconds_count 1" in text


# ----------------------------------------------------------------------------- where it stands

def workload(*conds, cq="team-cq", uid="wl-uid", name="job-c-worker-abc") -> dict:
    status = {"conditions": [{"type": t, "status": s, "reason": r, "message": m,
                              "lastTransitionTime": "2026-01-01T12:00:00Z"} for t, s, r, m in conds]}
    if any(t == "QuotaReserved" and s == "True" for t, s, _, _ in conds):
        status["admission"] = {"clusterQueue": cq}
    return {"metadata": {"name": name, "namespace": "team-a", "uid": uid}, "status": status}


CQ = {"metadata": {"name": "team-cq"},
      "spec": {"resourceGroups": [{"flavors": [{"name": "default-flavor", "resources": [
          {"name": "cpu", "nominalQuota": "4"}]}]}]},
      "status": {"flavorsUsage": [{"name": "default-flavor", "resources": [{"name": "cpu", "total": "3200m"}]}]}}
NOW = T0 + timedelta(minutes=2, seconds=5)
PENDING = ("QuotaReserved", "False", "Pending",
           "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 1500m more needed")


def test_queued_says_why_and_where():
    info = kq.info(training.job_row(queued_job(suspended=True)), workload(PENDING), CQ, NOW)
    assert info.state == kq.QUEUED
    assert info.line == ("waiting in LocalQueue team for 2m05s: waiting for cpu in ClusterQueue team-cq "
                         "(flavor default-flavor): 3.2 of 4 in use, 1500m more needed")
    # A tenant who may not read ClusterQueues still gets Kueue's reason.
    assert "waiting for cpu (flavor default-flavor): 1500m more needed" in kq.info(
        training.job_row(queued_job(suspended=True)), workload(PENDING), None, NOW).line


def test_admitted_preempted_requeued():
    row = training.job_row(queued_job(suspended=False))
    admitted = workload(("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", ""))
    assert kq.info(row, admitted, CQ, NOW).state == kq.ADMITTED
    by = ("Preempted", "True", "InClusterQueue",
          "Preempted to accommodate a workload (UID: hi-uid, JobUID: hi-job) due to prioritization in the "
          "ClusterQueue; preemptor path: /team-cq; preemptee path: /team-cq")
    stopping = workload(("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", ""),
                        ("Evicted", "True", "Preempted", "Preempted to accommodate..."), by)
    info = kq.info(row, stopping, CQ, NOW, {"hi-uid": "team-a/job-hi-worker-1"})
    assert info.state == kq.PREEMPTED and info.preempted_by == "team-a/job-hi-worker-1"
    assert "prioritization in the ClusterQueue" in info.line
    requeued = workload(PENDING, ("Evicted", "True", "Preempted", ""), by, ("Requeued", "True", "Preempted", ""))
    info = kq.info(training.job_row(queued_job(suspended=True)), requeued, CQ, NOW, {})
    assert info.state == kq.REQUEUED and info.line.startswith("requeued after preemption by workload hi-uid")
    assert kq.preempted(requeued) and not kq.preempted(admitted)


def test_no_workload_yet_and_no_queue():
    assert "Kueue has made no Workload" in kq.info(training.job_row(queued_job(suspended=True)), None, None, NOW).line
    assert kq.info(training.job_row(job()), None, None, NOW) is None


# ----------------------------------------------------------------------------- options and values

def test_queue_and_priority_options_are_values():
    v = compute_values(ClusterOptions(name="c", queue="team", priority="high"))
    assert v["queue"] == {"name": "team", "priorityClass": "high"}
    assert "queue" not in compute_values(ClusterOptions(name="c"))
    with pytest.raises(SpecError, match="--queue: 'Team Q' is not the name of a Kueue object"):
        compute_values(ClusterOptions(name="c", queue="Team Q"))


def test_a_users_workspace_queue_is_the_lowest_values():
    v = userspec.cluster_values_for_user("alice", None, "training")
    assert v["queue"] == {"name": "training"}
    assert "queue" not in userspec.cluster_values_for_user("alice", None)


def test_user_queue_values():
    opts = userspec.UserOptions("alice", queue=True, queue_cpu="2", borrow_cpu="1", priorities=["low", "high", "low"])
    q = userspec.compute_user_values(opts)["queue"]
    assert q == {"enabled": True, "nominalQuota": {"cpu": "2"}, "borrowingLimit": {"cpu": "1"},
                 "priorityClasses": ["high", "low"]}
    assert "queue" not in userspec.compute_user_values(userspec.UserOptions("alice"))
    assert userspec.compute_user_values(userspec.UserOptions("alice", priorities=["low"]))["queue"]["enabled"]
    with pytest.raises(SpecError, match="--no-queue"):
        userspec.compute_user_values(userspec.UserOptions("alice", queue=False, queue_cpu="2"))
    with pytest.raises(SpecError, match="--queue-cpu"):
        userspec.compute_user_values(userspec.UserOptions("alice", queue_cpu="lots"))


def test_suspended_since_is_the_suspended_condition():
    j = queued_job(suspended=True, suspended_at=datetime(2026, 1, 1, 11, 0, tzinfo=timezone.utc))
    assert training.job_row(j).suspended_since.hour == 11
    assert training.job_row(queued_job(suspended=False)).suspended_since is None
