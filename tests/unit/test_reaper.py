"""The reaper's decision (pure) and its watch loop against a scripted fake client."""

from __future__ import annotations

import queue
import threading
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from kubernetes import client as k8s

from tfhelm import reaper
from tfhelm.apierrors import refusal
from tfhelm.cluster import report, training
from tfhelm.errors import SpecError, TfhelmError
from tfhelm.reaper import GRACE, KEEP, REAP, WAIT, ReapConfig, decide, default_config

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def job(cluster="c", role="worker", *, uid=None, state="Running", total=2, succeeded=0, failed=0,
        finished=T0, reason="BackoffLimitExceeded", completed="", failed_idx="", server=False,
        suspended=False, rv="1") -> k8s.V1Job:
    conds = []
    if state in ("Complete", "Failed"):
        conds.append(k8s.V1JobCondition(type=state, status="True", last_transition_time=finished,
                                        reason=reason if state == "Failed" else None))
    return k8s.V1Job(
        metadata=k8s.V1ObjectMeta(name=f"{cluster}-{role}", uid=uid or f"uid-{cluster}-{role}",
                                  resource_version=rv,
                                  labels={"tfhelm.io/cluster": cluster, "tfhelm.io/role": role},
                                  annotations={"tfhelm.io/runs": "server" if server else "script"}),
        spec=k8s.V1JobSpec(completions=total, suspend=suspended, template=k8s.V1PodTemplateSpec(
            spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="tensorflow")]))),
        status=k8s.V1JobStatus(conditions=conds, succeeded=succeeded, failed=failed,
                               completion_time=finished if state == "Complete" else None,
                               completed_indexes=completed or None, failed_indexes=failed_idx or None))


def pod_meta(j: k8s.V1Job, index: int, *, owner: bool = True) -> dict:
    """A pod's metadata (the API's JSON) as the Job controller makes it: owned by the Job,
    its index in an annotation and a label."""
    meta = {"name": f"{j.metadata.name}-{index}-x", "labels": {"batch.kubernetes.io/job-completion-index": str(index)},
            "annotations": {training.COMPLETION_INDEX: str(index)}}
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": j.metadata.name, "uid": j.metadata.uid, "controller": True}]
    return meta


def tasks(j: k8s.V1Job, *indexes) -> training.SucceededTasks:
    seen = training.SucceededTasks()
    for i in indexes:
        seen.add(pod_meta(j, i))
    return seen


def rows(*jobs):
    return [training.job_row(j) for j in jobs]


def ts(dt: datetime) -> float:
    return dt.timestamp()


# ----------------------------------------------------------------------------- pure core

def test_waits_while_the_decisive_job_runs():
    d = decide("c", rows(job(succeeded=1)), default_config(), ts(T0))
    assert d.action == WAIT and "worker 1/2 succeeded" in d.message


def test_auto_means_the_chief_when_there_is_one():
    jobs = rows(job(role="chief", total=1), job(state="Complete", succeeded=2))
    assert decide("c", jobs, default_config(), ts(T0)).action == WAIT
    jobs = rows(job(role="chief", total=1, state="Complete", succeeded=1), job(server=True))
    d = decide("c", jobs, default_config(grace=0), ts(T0) + 5)
    assert d.action == REAP and d.job.role == "chief"
    assert d.stop_workers == "c-worker", "in-graph worker servers are stopped"


def test_all_workers_ignores_the_chief():
    jobs = rows(job(role="chief", total=1), job(state="Complete", succeeded=2))
    d = decide("c", jobs, default_config(grace=0, completion="all-workers"), ts(T0) + 5)
    assert d.action == REAP and d.job.role == "worker" and d.stop_workers is None


def test_chief_completion_without_a_chief_names_the_problem():
    d = decide("c", rows(job()), default_config(completion="chief"), ts(T0))
    assert d.action == WAIT and d.job is None and "no chief Job" in d.message


def test_grace_runs_from_the_server_stamp_rounded_up():
    jobs = rows(job(state="Complete", succeeded=2))
    cfg = default_config(grace=30)
    d = decide("c", jobs, cfg, ts(T0) + 10)
    assert d.action == GRACE and d.due == ts(T0) + 1 + 30
    assert decide("c", jobs, cfg, ts(T0) + 31).action == REAP


def test_grace_runs_from_when_it_was_seen_if_that_is_earlier():
    jobs = rows(job(state="Complete", succeeded=2))
    d = decide("c", jobs, default_config(grace=30), ts(T0) + 0.2, observed=ts(T0) + 0.1)
    assert d.action == GRACE and d.due == pytest.approx(ts(T0) + 30.1)


def test_a_restarted_reaper_continues_the_grace_period():
    jobs = rows(job(state="Complete", succeeded=2))
    # the first reaper saw it at T0+0.1, was killed; the new one first sees it at T0+20
    d = decide("c", jobs, default_config(grace=30), ts(T0) + 20, observed=ts(T0) + 20)
    assert d.due == ts(T0) + 31


def test_worker_0():
    cfg = default_config(grace=0, completion="worker-0")
    d = decide("c", rows(job(completed="0,2-3", succeeded=3, total=5)), cfg, ts(T0), observed=ts(T0))
    assert d.action == REAP and "worker task 0" in d.message
    assert decide("c", rows(job(completed="1-4", total=5)), cfg, ts(T0)).action == WAIT
    d = decide("c", rows(job(failed_idx="0", total=5)), cfg, ts(T0))
    assert d.action == KEEP and d.outcome == "Failed"


def test_worker_0_grace_counts_from_when_it_was_seen():
    cfg = default_config(grace=10, completion="worker-0")
    d = decide("c", rows(job(completed="0", total=5)), cfg, ts(T0) + 100, observed=ts(T0) + 95)
    assert d.action == GRACE and d.due == ts(T0) + 105


def test_failure_keep_and_reap():
    failed = rows(job(state="Failed", failed=4, reason="DeadlineExceeded"))
    d = decide("c", failed, default_config(grace=0), ts(T0) + 5)
    assert d.action == KEEP and "DeadlineExceeded" in d.message and "tfhelm reap c" in d.message
    d = decide("c", failed, default_config(grace=0, on_failure="reap"), ts(T0) + 5)
    assert d.action == REAP and d.outcome == "Failed"


def test_suspended_or_finished_workers_are_not_stopped_again():
    chief = job(role="chief", total=1, state="Complete", succeeded=1)
    d = decide("c", rows(chief, job(server=True, suspended=True)), default_config(grace=0), ts(T0) + 5)
    assert d.stop_workers is None
    d = decide("c", rows(chief, job(server=False)), default_config(grace=0), ts(T0) + 5)
    assert d.stop_workers is None, "between-graph workers run the script: left alone"


@pytest.mark.parametrize("cfg,field", [(replace(default_config(), grace=-1), "--grace"),
                                       (replace(default_config(), completion="all"), "--completion"),
                                       (replace(default_config(), on_failure="drop"), "--on-failure")])
def test_bad_config(cfg, field):
    with pytest.raises(SpecError) as e:
        cfg.validate()
    assert e.value.field == field


def test_has_index():
    assert training.has_index("0-3,7", 0) and training.has_index("0-3,7", 7)
    assert not training.has_index("1-3,7", 0) and not training.has_index("", 0)


def test_job_row_details():
    r = training.job_row(job(state="Failed", reason="BackoffLimitExceeded", server=True))
    assert (r.state, r.reason, r.runs_server, r.cluster) == ("Failed", "BackoffLimitExceeded", True, "c")
    annotated = job()
    annotated.metadata.annotations = {"tfhelm.io/runs": "server"}
    assert training.job_row(annotated).runs_server


def test_training_done_keeps_its_default_rule():
    assert training.training_done(rows(job(role="chief", total=1, state="Failed"), job())) == "Failed"
    assert training.training_done(rows(job(state="Complete"))) == "Complete"
    assert training.training_done(rows(job())) is None


def test_event_names_are_deterministic():
    r = training.job_row(job(uid="0123456789abcdef"))
    assert reaper.event_name(r, "TFClusterReaped") == "c-worker.tfclusterreaped.01234567"


def test_a_clusters_values_give_the_reapers_configuration():
    from tfhelm.cluster.values import ClusterValues

    values = ClusterValues.from_release({"reaper": {"grace": 5, "onFailure": "reap"}})
    cfg = ReapConfig.from_section(values.effective["reaper"])
    assert cfg == ReapConfig(grace=5, completion="auto", on_failure="reap")


def test_reaper_lines():
    ev = k8s.CoreV1Event(metadata=k8s.V1ObjectMeta(name="x"), involved_object=k8s.V1ObjectReference(),
                         reason="TFClusterReaped", message="gone", last_timestamp=T0)
    other = k8s.CoreV1Event(metadata=k8s.V1ObjectMeta(name="y"), involved_object=k8s.V1ObjectReference(),
                            reason="Completed", message="x", last_timestamp=T0)
    assert report.reaper_lines([other, ev]) == ["reaper: 2026-01-01 12:00:00 TFClusterReaped: gone"]


# ----------------------------------------------------------------------------- the loop

class FakeClient:
    """Jobs and Succeeded pods in memory; `push()` and `succeed()` deliver watch events;
    failures are scripted."""

    def __init__(self, *jobs, releases=("c-ps",), pods_forbidden=False):
        self.jobs = {j.metadata.uid: j for j in jobs}
        self.pods: dict[str, dict] = {}  # Succeeded pods' metadata, by name
        self.pods_forbidden = pods_forbidden
        self._pod_q: queue.Queue = queue.Queue()
        self.pod_selectors: list[str] = []
        self.releases = set(releases)
        self.ps_objects = {"c": ["Deployment c-ps-0", "Service c-ps-0"]}
        self.events: dict[str, tuple] = {}
        self.calls: list[tuple] = []
        self.rv = 1
        self.watch_failures: list[Exception] = []  # raised by the next watch_jobs calls
        self.uninstall_failures: list[Exception] = []
        self._q: queue.Queue = queue.Queue()
        self.lists = 0

    # what the test does
    def push(self, kind, j):
        self.rv += 1
        if kind == "DELETED":
            self.jobs.pop(j.metadata.uid, None)
        else:
            self.jobs[j.metadata.uid] = j
        self._q.put((kind, j, str(self.rv)))

    def succeed(self, j, *indexes):
        """The pods of these indexes of Job `j` turn Succeeded (the Job is not told)."""
        for i in indexes:
            meta = pod_meta(j, i)
            self.rv += 1
            self.pods[meta["name"]] = meta
            self._pod_q.put(("ADDED", {"metadata": meta}, str(self.rv)))

    def expire(self):
        self._q.put(reaper.Gone("too old"))

    # ReapClient
    def list_jobs(self, namespace, selector):
        self.lists += 1
        self.calls.append(("list",))
        want = selector.partition("=")[2]
        items = [j for j in self.jobs.values() if not want or j.metadata.labels["tfhelm.io/cluster"] == want]
        return items, str(self.rv)

    def watch_jobs(self, namespace, selector, resource_version, timeout):
        if self.watch_failures:
            raise self.watch_failures.pop(0)
        while True:
            item = self._q.get()
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            yield item

    def list_pods(self, namespace, selector):
        self.pod_selectors.append(selector)
        if self.pods_forbidden:  # as RBAC says it
            e = k8s.ApiException(status=403, reason="Forbidden")
            e.body = ('{"message": "pods is forbidden: User \\"system:serviceaccount:ns:c-reaper\\" '
                      'cannot list resource \\"pods\\" in API group \\"\\" in the namespace \\"ns\\""}')
            raise e
        return [{"metadata": m} for m in self.pods.values()], str(self.rv)

    def watch_pods(self, namespace, selector, resource_version, timeout):
        while True:
            item = self._pod_q.get()
            if item is None:
                return
            yield item

    def stop_watch(self):
        self._q.put(None)
        self._pod_q.put(None)

    def uninstall_ps(self, namespace, cluster):
        release = f"{cluster}-ps"
        self.calls.append(("uninstall", release))
        if self.uninstall_failures:
            raise self.uninstall_failures.pop(0)
        if release in self.releases:
            self.releases.discard(release)
            self.ps_objects.pop(cluster, None)
            return release
        return None

    def delete_ps(self, namespace, cluster):
        self.calls.append(("delete_ps", cluster))
        return self.ps_objects.pop(cluster, [])

    def suspend_job(self, namespace, name):
        self.calls.append(("suspend", name))
        return True

    def emit(self, namespace, job, reason, message, warning):
        self.calls.append(("event", reason, job.name))
        name = reaper.event_name(job, reason)
        if name in self.events:
            return False
        self.events[name] = (reason, message, warning)
        return True

    def refused(self, error):
        return refusal(error)

    def reasons(self):
        return sorted(r for r, _, _ in self.events.values())


def run_in_thread(r: reaper.Reaper):
    box = {}

    def target():
        try:
            box["result"] = r.run()
        except Exception as e:  # noqa: BLE001
            box["error"] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def finish(t, box, timeout=10):
    t.join(timeout)
    assert not t.is_alive(), "reaper did not finish"
    if "error" in box:
        raise box["error"]
    return box["result"]


def wait_until(check, timeout=10):
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if check():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached")


def fast(**kw):
    return dict(backoff=(0.01, 0.05), log_line=lambda _: None, **kw)


def test_reaps_when_the_watch_reports_completion():
    fc = FakeClient(job(rv="1"))
    r = reaper.Reaper(fc, "ns", "c", default_config(grace=0.2), **fast())
    t, box = run_in_thread(r)
    fc.push("MODIFIED", job(succeeded=1))
    fc.push("MODIFIED", job(state="Complete", succeeded=2, finished=datetime.now(timezone.utc)))
    res = finish(t, box)
    assert res.action == REAP and res.outcome == "Complete"
    assert res.removed == ["deleted Deployment c-ps-0, Service c-ps-0", "uninstalled release ns/c-ps"]
    assert fc.calls.index(("delete_ps", "c")) < fc.calls.index(("uninstall", "c-ps")), \
        "the PS stop first; Helm then removes the release record"
    assert fc.reasons() == ["TFClusterReaped", "TFClusterReaping"]


def test_without_grace_training_done_is_announced_beside_the_deletes():
    """Grace 0: the TFClusterReaping Event (training done) does not wait for the deletes and
    Helm; the reap's own Event follows them."""
    fc = FakeClient(job(rv="1"))
    t, box = run_in_thread(reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast()))
    fc.push("MODIFIED", job(state="Complete", succeeded=2))
    assert finish(t, box).action == REAP
    assert fc.reasons() == ["TFClusterReaped", "TFClusterReaping"]
    assert fc.calls.index(("event", "TFClusterReaped", "c-worker")) > fc.calls.index(("uninstall", "c-ps"))


def test_restart_after_reap_is_a_quiet_no_op():
    done = job(state="Complete", succeeded=2, finished=T0)
    fc = FakeClient(done)
    assert reaper.Reaper(fc, "ns", "c", default_config(grace=1), **fast()).run().action == REAP
    before = dict(fc.events)
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=1), **fast()).run()
    assert res.action == REAP and "already gone" in res.message
    assert fc.events == before, "no second Event"


def test_relists_after_410_gone():
    fc = FakeClient(job())
    r = reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast())
    t, box = run_in_thread(r)
    # the completion happens while the watch is expired: only a new list sees it
    fc.jobs = {"uid-c-worker": job(state="Complete", succeeded=2)}
    fc.expire()
    assert finish(t, box).action == REAP
    assert fc.lists == 2


def test_survives_a_dropped_connection():
    fc = FakeClient(job())
    fc.watch_failures = [ConnectionRefusedError("apiserver down")] * 3
    lines = []
    r = reaper.Reaper(fc, "ns", "c", default_config(grace=0), backoff=(0.01, 0.05), log_line=lines.append)
    t, box = run_in_thread(r)
    wait_until(lambda: any("unreachable" in ln for ln in lines))  # the job completes meanwhile
    fc.jobs = {"uid-c-worker": job(state="Complete", succeeded=2)}
    assert finish(t, box).action == REAP
    assert any("watching again" in ln for ln in lines)


def test_in_graph_workers_are_suspended():
    fc = FakeClient(job(role="chief", total=1, state="Complete", succeeded=1), job(server=True))
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast()).run()
    assert ("suspend", "c-worker") in fc.calls and "suspended Job c-worker" in res.removed[-1]


def test_failure_kept_then_reaped_on_request():
    failed = job(state="Failed", failed=3)
    fc = FakeClient(failed)
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast()).run()
    assert res.action == KEEP and not [c for c in fc.calls if c[0] == "uninstall"]
    assert fc.events[reaper.event_name(training.job_row(failed), "TFClusterKept")][2] is True  # Warning
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=0, on_failure="reap"), **fast()).run()
    assert res.action == REAP and "c-ps" not in fc.releases


def test_one_release_cluster_is_deleted_directly():
    fc = FakeClient(job(state="Complete", succeeded=2), releases=())
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=0), **fast()).run()
    assert res.removed == ["deleted Deployment c-ps-0, Service c-ps-0"], "no release: nothing else"
    fc2 = FakeClient(job(state="Complete", succeeded=2))
    reaper.Reaper(fc2, "ns", "c", default_config(grace=0, delete_directly=True), **fast()).run()
    assert not [c for c in fc2.calls if c[0] == "uninstall"]


def test_a_failed_action_is_retried():
    fc = FakeClient(job(state="Complete", succeeded=2))
    fc.uninstall_failures = [RuntimeError("connection refused")]
    lines = []
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=0), backoff=(0.01, 0.05),
                        log_line=lines.append).run()
    assert res.action == REAP and [c for c in fc.calls if c[0] == "uninstall"] == [("uninstall", "c-ps")] * 2
    assert any("retrying" in ln for ln in lines)


def test_no_such_cluster():
    with pytest.raises(TfhelmError, match="no TF cluster 'c'"):
        reaper.Reaper(FakeClient(), "ns", "c", default_config(), **fast()).run()


def test_cluster_deleted_while_waiting():
    fc = FakeClient(job())
    t, box = run_in_thread(reaper.Reaper(fc, "ns", "c", default_config(), **fast()))
    wait_until(lambda: fc.lists)
    fc.push("DELETED", job())
    with pytest.raises(TfhelmError, match="deleted before training finished"):
        finish(t, box)


def test_chief_completion_on_a_cluster_without_chief_is_a_usage_error():
    with pytest.raises(SpecError, match="no chief Job"):
        reaper.Reaper(FakeClient(job()), "ns", "c", default_config(completion="chief"), **fast()).run()


def test_namespace_reaper_handles_clusters_independently():
    a, b = job("a"), job("b", state="Failed", failed=1)
    fc = FakeClient(a, b, releases=("a-ps", "b-ps"))
    r = reaper.Reaper(fc, "ns", None, default_config(grace=0), **fast())
    t, box = run_in_thread(r)
    fc.push("MODIFIED", job("a", state="Complete", succeeded=2))

    def settled():
        return "a-ps" not in fc.releases and any(c == ("event", "TFClusterKept", "b-worker") for c in fc.calls)
    wait_until(settled)
    r.stop()
    finish(t, box)
    assert settled() and "b-ps" in fc.releases, "the failed cluster keeps its PS"


# ----------------------------------------------------------------------------- a further rule

class Ungate:
    """A toy rule as another helper would write one: remove a gate from each gated object of its
    own source, once; the first try fails."""

    name = "ungate"

    def __init__(self):
        self.objects = [{"metadata": {"uid": "p1", "name": "p1"}, "gated": True},
                        {"metadata": {"uid": "p2", "name": "p2"}, "gated": False}]
        self.acted: list[str] = []
        self.fail_once = True
        self.sources = {"gated": reaper.Source(list=lambda client, ns: (self.objects, "1"),
                                               watch=lambda client, ns, rv, timeout: self.quiet())}

    @staticmethod
    def quiet():
        """A watch on which nothing happens (it ends as the API server would, later)."""
        threading.Event().wait(1.1)
        yield from ()

    def decide(self, view, now):
        return [o["metadata"]["name"] for o in view.objects["gated"].values() if o["gated"]]

    def act(self, client, action):
        self.acted.append(action)
        if self.fail_once:
            self.fail_once = False
            raise ConnectionError("the API server went away")
        return f"ungated {action}"


def test_a_further_rule_decides_from_its_source_and_acts_once_with_retries():
    rule, lines = Ungate(), []
    fc = FakeClient(job())
    r = reaper.Reaper(fc, "ns", "c", default_config(), forever=True, rules=[rule], backoff=(0.01, 0.05),
                      log_line=lines.append)
    t, box = run_in_thread(r)
    wait_until(lambda: any("ungate: ungated p1" in line for line in lines))
    r.stop()
    finish(t, box)
    assert rule.acted == ["p1", "p1"]  # failed, retried after the backoff, then never again
    assert any("ungate: p1 failed, retrying" in line for line in lines), lines
    assert not [c for c in fc.calls if c[0] in ("delete_ps", "uninstall")], "the reaping goes on as before"
