"""The lost-tasks rule (tfhelm/reaper/lost.py): which pods of a lost node the reaper removes
(only what the taint manager evicted and no kubelet finished, once the grace period is over),
how, and the loop running it for a cluster with nothing to reap."""

from __future__ import annotations

import queue
from datetime import datetime, timedelta, timezone

from tests.unit.test_reaper import FakeClient, fast, finish, job, run_in_thread, wait_until
from tfhelm import reaper
from tfhelm.reaper.lost import (ENDING_POLL, JOB_FINALIZER, LIVE, SOURCE, LostTasks, Replace, compact, overdue,
                                release_in_ending_namespace)
from tfhelm.reaper.protocol import View

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def pod(name="c-worker-0-x", *, uid=None, node="n1", deleting: datetime | None = T0, evicted=True,
        reason="DeletionByTaintManager", finalizers=(JOB_FINALIZER,), phase="Running") -> dict:
    """A pod as the API server sends it, with what the taint manager's eviction leaves."""
    conditions = [{"type": "Ready", "status": "False"}]
    if evicted:
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": reason,
                           "message": "Taint manager: deleting due to NoExecute taint"})
    meta = {"name": name, "uid": uid or f"uid-{name}", "labels": {"tfhelm.io/cluster": "c"},
            "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = deleting.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [{"name": "tensorflow"}]},
            "status": {"phase": phase, "conditions": conditions}}


def decide(pods, at: datetime, margin=5.0) -> list[Replace]:
    view = View("ns", {}, None, {SOURCE: {p["metadata"]["uid"]: compact(p) for p in pods}})
    return list(LostTasks("c", "ns", margin).decide(view, at.timestamp()))


def test_a_pod_evicted_from_a_lost_node_goes_once_its_grace_period_is_over_by_the_margin():
    lost = pod()
    assert decide([lost], T0 + timedelta(seconds=4.9)) == []  # a live kubelet may still be at it
    assert decide([lost], T0 + timedelta(seconds=5)) == [Replace("c-worker-0-x", "uid-c-worker-0-x", "n1", 0)]


def test_only_what_the_taint_manager_evicted_and_nobody_finished():
    at = T0 + timedelta(minutes=10)
    assert decide([pod(evicted=False)], at) == [], "deleted by someone else: its kubelet's business"
    assert decide([pod(reason="EvictionByEvictionAPI")], at) == [], "a drain's eviction: the kubelet answers"
    assert decide([pod(deleting=None)], at) == [], "condition set, deletion not yet made"


def test_the_jobs_finalizer_is_named_by_its_index_and_a_ps_pod_has_none():
    at = T0 + timedelta(minutes=1)
    (worker,) = decide([pod(finalizers=("example.com/keep", JOB_FINALIZER))], at)
    assert worker.finalizer == 1
    (ps,) = decide([pod("c-ps-0-abc", finalizers=())], at)
    assert ps.finalizer is None


def test_overdue_reads_the_api_servers_timestamp():
    assert not overdue(compact(pod()), T0.timestamp() + 4, margin=5)
    assert overdue(compact(pod()), T0.timestamp() + 4, margin=0)


class Recorder:
    def __init__(self):
        self.calls = []

    def remove_finalizer(self, *args):
        self.calls.append(("remove_finalizer", *args))

    def delete_pod_now(self, *args):
        self.calls.append(("delete_pod_now", *args))


def test_the_action_takes_the_finalizer_off_then_deletes_with_no_grace_by_uid():
    rule, client = LostTasks("c", "ns"), Recorder()
    line = rule.act(client, Replace("c-worker-1-x", "u1", "n2", 0))
    assert client.calls == [("remove_finalizer", "ns", "c-worker-1-x", "u1", 0, JOB_FINALIZER),
                            ("delete_pod_now", "ns", "c-worker-1-x", "u1")]
    assert "node n2" in line and "starts the task again" in line
    client.calls.clear()
    rule.act(client, Replace("c-ps-0-x", "u2", "n2", None))
    assert client.calls == [("delete_pod_now", "ns", "c-ps-0-x", "u2")]


class LiveClient(FakeClient):
    """FakeClient with the rule's calls: the cluster's live pods and the two actions."""

    def __init__(self, *jobs, live=()):
        super().__init__(*jobs)
        self.live = {p["metadata"]["uid"]: p for p in live}
        self.live_selectors = []
        self._live_q = queue.Queue()

    def list_live_pods(self, namespace, selector, fields):
        self.live_selectors.append((selector, fields))
        return list(self.live.values()), "1"

    def watch_live_pods(self, namespace, selector, fields, resource_version, timeout):
        while (item := self._live_q.get()) is not None:
            yield item

    def remove_finalizer(self, namespace, name, uid, index, finalizer):
        self.calls.append(("remove_finalizer", name, index))

    def delete_pod_now(self, namespace, name, uid):
        self.calls.append(("delete_pod_now", name))
        self.rv += 1
        self._live_q.put(("DELETED", self.live.pop(uid), str(self.rv)))

    def stop_watch(self):
        super().stop_watch()
        self._live_q.put(None)


def test_the_loop_replaces_a_collective_clusters_lost_task_and_reaps_nothing():
    """A cluster without PS runs the reaper for this rule only (`--no-reap`): the lost
    worker's pod goes once, the one still on a live node stays, nothing is reaped."""
    lost, fine = pod("c-worker-1-x"), pod("c-worker-0-y", evicted=False, deleting=None)
    client = LiveClient(job(state="Complete", succeeded=2), live=[lost, fine])
    lines = []
    r = reaper.Reaper(client, "ns", "c", reaper.default_config(grace=0), forever=True, reap=False,
                      rules=[LostTasks("c", "ns")], **{**fast(), "log_line": lines.append})
    t, box = run_in_thread(r)
    wait_until(lambda: any("lost tasks: removed pod c-worker-1-x" in line for line in lines))
    r.stop()
    finish(t, box)
    assert [c for c in client.calls if c[0] in ("remove_finalizer", "delete_pod_now")] == [
        ("remove_finalizer", "c-worker-1-x", 0), ("delete_pod_now", "c-worker-1-x")]
    assert not [c for c in client.calls if c[0] in ("delete_ps", "uninstall", "event")], "nothing reaped"
    assert client.live_selectors == [("tfhelm.io/cluster=c", LIVE)]


class EndingNamespace:
    """The cluster's pods as the namespace controller leaves them (all being deleted), going
    one look after another as the kubelets finish them; a pod stays while it has a finalizer."""

    def __init__(self, *looks):
        self.looks, self.calls = list(looks), []

    def list_live_pods(self, namespace, selector, fields):
        self.calls.append(("list", selector, fields))
        pods = self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        return [p for p in pods if (p["metadata"]["name"], "removed") not in self.calls], "1"

    def remove_finalizer(self, namespace, name, uid, index, finalizer):
        self.calls.append((name, "removed"))
        assert (uid, index, finalizer) == (f"u-{name}", 0, JOB_FINALIZER)


def test_a_namespace_being_deleted_gets_the_finished_pods_the_job_controller_keeps():
    """The last failed pod of each index keeps the Job's finalizer (Kubernetes waits to make
    the index again, which the namespace refuses): the reaper takes it off; a pod still
    stopping, the reaper's own pod and a pod without the finalizer are left to Kubernetes."""
    def task(name, phase, finalizers=(JOB_FINALIZER,)):
        return pod(name, uid=f"u-{name}", evicted=False, finalizers=finalizers, phase=phase)
    stopping, me = task("c-worker-0-a", "Running"), task("c-reaper-z", "Running", finalizers=())
    failed, done, free = task("c-worker-1-b", "Failed"), task("c-chief-0-c", "Succeeded"), task("c-ps-0-d", "Failed", ())
    client = EndingNamespace([stopping, me, failed, done, free], [task("c-worker-0-a", "Failed"), me, failed, free], [me])
    now = [0.0]
    released = release_in_ending_namespace(client, "ns", "c", "c-reaper-z", 60, lambda: now[0],
                                                lambda s: now.__setitem__(0, now[0] + s))
    assert released == ["c-worker-1-b", "c-chief-0-c", "c-worker-0-a"]
    assert client.calls[0] == ("list", "tfhelm.io/cluster=c", "")
    assert now[0] == 2 * ENDING_POLL  # two looks with pods left; the third finds only its own


def test_releasing_ends_at_its_bound_when_pods_never_finish():
    stuck = pod("c-worker-0-a", uid="u-c-worker-0-a", evicted=False, phase="Running")
    client = EndingNamespace([stuck])
    now = [0.0]
    assert release_in_ending_namespace(client, "ns", "c", "me", 5, lambda: now[0],
                                            lambda s: now.__setitem__(0, now[0] + s)) == []
    assert now[0] == 5
