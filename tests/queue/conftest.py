"""Fixtures for the `queue` tier: trainings that share the local cluster's two real training
nodes through a real Kueue (tfhelm_dev.localkueue, started once per session and stopped at its
end), as tenants of one cluster do: queued, admitted as wholes, preempted by priority,
resumed, users borrowing from each other (docs/queue.md).

Every test records its run with a `Recorder`: one watch on the TF clusters' pods and one on
their worker Jobs, merged in the order the API server wrote them (resourceVersions of one etcd),
so what a cluster held at each moment is read back from events, never from time.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.utils import parse_quantity
from urllib3.exceptions import ProtocolError

from tests.cluster.conftest import api_client, core, external_cluster, kubeconfig, wait_for  # noqa: F401
from tests.realpods.conftest import find_nodes, namespace, pod_logs, run, volume_dir  # noqa: F401
from tfhelm_dev import localkueue

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples"
KUEUE = "kueue.x-k8s.io/v1beta2"
SMALL = ["--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi"]
TASK_ROLES = ("ps", "worker", "chief", "evaluator")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.queue)


@pytest.fixture(scope="session")
def nodes(kubeconfig, core, external_cluster):  # noqa: F811 - this tier's own, not realpods' autouse one
    return find_nodes(core, external_cluster)


@pytest.fixture(scope="session")
def kueue(kubeconfig, external_cluster):
    """A real Kueue in the local cluster (an external cluster must bring its own)."""
    if external_cluster:
        yield None
        return
    started = not localkueue.running()
    try:
        localkueue.start()
    except localkueue.LocalKueueError as e:
        pytest.fail(f"Kueue did not start: {e}", pytrace=False)
    yield None
    if started:
        localkueue.stop()
        assert not localkueue.leftovers(), "stopping Kueue left these behind"


@pytest.fixture
def objects(kueue):
    """Apply Kueue objects (server-side, as an admin does); deleted again after the test."""
    made: list[dict] = []

    def apply(*objs: dict) -> None:
        run("kubectl", "apply", "--server-side", "--field-manager=tfhelm-tests", "-f", "-",
            stdin=yaml.safe_dump_all(objs))
        made.extend(objs)
    yield apply
    if made:
        run("kubectl", "delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=yaml.safe_dump_all(made[::-1]))


def local_queue(namespace: str, cluster_queue: str, name: str = "team") -> dict:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def cluster_queue(name: str, cpu: str, *, cohort: str | None = None, preemption: dict | None = None) -> dict:
    spec = {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "preemption": preemption or {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
                "name": localkueue.FLAVOR, "resources": [{"name": "cpu", "nominalQuota": cpu},
                                                          {"name": "memory", "nominalQuota": "16Gi"}]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def workload_of(api_client, namespace: str, job_uid: str) -> dict | None:
    found = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={job_uid}")
    return found["items"][0] if found["items"] else None


def condition(obj: dict | None, kind: str) -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind and c["status"] == "True":
            return c
    return None


# ---------------------------------------------------------------- the record of a run

@dataclass
class Event:
    rv: int
    kind: str  # Pod or Job
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict

    @property
    def cluster(self) -> str:
        meta = self.obj["metadata"]
        return f"{meta['namespace']}/{(meta.get('labels') or {}).get('tfhelm.io/cluster', '?')}"


@dataclass
class Recorder:
    """Pods and worker Jobs of every TF cluster, as the API server wrote them."""

    api: client.ApiClient
    events: list[Event] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watches: list[watch.Watch] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> "Recorder":
        core, batch = client.CoreV1Api(self.api), client.BatchV1Api(self.api)
        ready = []
        for kind, lister, selector in (("Pod", core.list_pod_for_all_namespaces, "tfhelm.io/cluster"),
                                       ("Job", batch.list_job_for_all_namespaces, "tfhelm.io/role=worker")):
            listed = lister(label_selector=selector)
            for obj in listed.items:
                self._add(kind, "ADDED", obj)
            w = watch.Watch()
            self._watches.append(w)
            started = threading.Event()
            ready.append(started)
            t = threading.Thread(target=self._follow, args=(w, kind, lister, selector, listed.metadata.resource_version,
                                                            started), daemon=True)
            t.start()
            self._threads.append(t)
        for started in ready:
            started.wait(10)
        return self

    def _follow(self, w, kind, lister, selector, rv, started):
        started.set()
        while True:
            try:
                for ev in w.stream(lister, label_selector=selector, resource_version=rv, timeout_seconds=300,
                                   allow_watch_bookmarks=False):
                    rv = ev["object"].metadata.resource_version
                    self._add(kind, ev["type"], ev["object"])
                if w._stop:  # stopped by the test
                    return
            except client.ApiException as e:
                if e.status == 410:  # expired: a list would lose events; a test run is short
                    raise AssertionError("the recorder's watch expired (410): events were lost") from e
                raise
            except (ProtocolError, OSError):  # the stream was cut: watch again from the last event seen
                if w._stop:
                    return

    def _add(self, kind, type_, obj):
        d = self.api.sanitize_for_serialization(obj)
        with self._lock:
            self.events.append(Event(int(d["metadata"]["resourceVersion"]), kind, type_, d))

    def stop(self) -> list[Event]:
        for w in self._watches:
            w.stop()
        with self._lock:
            return sorted(self.events, key=lambda e: e.rv)

    def snapshot(self) -> list[Event]:
        with self._lock:
            return sorted(self.events, key=lambda e: e.rv)


@pytest.fixture
def recorder(api_client):
    r = Recorder(api_client).start()
    yield r
    r.stop()


def _cpu(pod: dict) -> Decimal:
    return sum((parse_quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
                for c in pod["spec"]["containers"]), Decimal(0))


def _task(pod: dict) -> str:
    labels, ann = pod["metadata"].get("labels") or {}, pod["metadata"].get("annotations") or {}
    return f"{labels.get('tfhelm.io/role')}:{labels.get('tfhelm.io/task-index', ann.get('batch.kubernetes.io/job-completion-index'))}"


def _holds(pod: dict) -> bool:
    """Bound to a node, and neither stopping nor ended."""
    return bool(pod["spec"].get("nodeName")) and not pod["metadata"].get("deletionTimestamp") \
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def check_no_queued_cluster_holds_a_node(events: list[Event], capacity: Decimal) -> dict:
    """Over a run (events in the API server's order), for queued clusters (worker Job with a
    Kueue queue label):
      1. no pod is bound to a node while its cluster's workers are not admitted (the worker
         Job suspended, or not there yet);
      2. a pod holding a node when Kueue suspends the workers (preemption) is stopping before
         the workers are admitted again;
      3. the clusters holding nodes at any moment fit the training nodes together (their
         whole demand: every task's CPU request), so none holds part of the nodes that another
         needs to start.
    Returns what it saw: {cluster: {"bound": n, "suspensions": n}} (tests assert on it)."""
    suspended: dict[str, bool] = {}
    queued: set[str] = set()
    pods: dict[str, dict] = {}
    demand: dict[str, dict[str, Decimal]] = {}
    holding_at_suspension: dict[str, set[str]] = {}
    seen: dict[str, dict[str, int]] = {}
    for ev in events:
        c = ev.cluster
        if ev.kind == "Job":
            job = ev.obj
            if ev.type == "DELETED" or job["metadata"].get("deletionTimestamp"):
                continue
            if "kueue.x-k8s.io/queue-name" not in (job["metadata"].get("labels") or {}):
                continue
            queued.add(c)
            now = bool(job["spec"].get("suspend"))
            if now and not suspended.get(c, True):  # admitted -> suspended: preempted or requeued
                holding_at_suspension[c] = {uid for uid, p in pods.items() if ev_cluster(p) == c and _holds(p)}
                seen.setdefault(c, {"bound": 0, "suspensions": 0})["suspensions"] += 1
            if not now and suspended.get(c, True):  # admitted
                still = {uid for uid in holding_at_suspension.pop(c, set()) if uid in pods and _holds(pods[uid])}
                assert not still, f"{c}: admitted again while pods of its preempted run still hold nodes: " \
                                  f"{[pods[u]['metadata']['name'] for u in still]}"
            suspended[c] = now
            continue
        pod, uid = ev.obj, ev.obj["metadata"]["uid"]
        if (pod["metadata"].get("labels") or {}).get("tfhelm.io/role") not in TASK_ROLES:
            continue  # the in-cluster controller runs while its cluster waits: it opens the gates
        before = pods.get(uid)
        if ev.type == "DELETED":
            pods.pop(uid, None)
        else:
            pods[uid] = pod
            demand.setdefault(c, {})[_task(pod)] = _cpu(pod)
        newly_bound = ev.type != "DELETED" and pod["spec"].get("nodeName") and not (before or {}).get("spec", {}).get("nodeName")
        if newly_bound:
            seen.setdefault(c, {"bound": 0, "suspensions": 0})["bound"] += 1
            if c in queued or (before is not None and _queued_by_labels(before)):
                assert not suspended.get(c, True), (
                    f"{c}: pod {pod['metadata']['name']} was bound to {pod['spec']['nodeName']} while the "
                    f"cluster's workers were not admitted (rv {ev.rv})")
        holding = {ev_cluster(p) for p in pods.values() if _holds(p)}
        total = sum(sum(demand[h].values()) for h in holding if h in demand)
        assert total <= capacity, (f"at rv {ev.rv} clusters {sorted(holding)} hold nodes and need {total} CPU "
                                   f"together, more than the training nodes' {capacity}")
    return seen


def ev_cluster(pod: dict) -> str:
    return f"{pod['metadata']['namespace']}/{(pod['metadata'].get('labels') or {}).get('tfhelm.io/cluster', '?')}"


def _queued_by_labels(pod: dict) -> bool:
    """A pod made gated (a queued cluster's PS, chief or evaluator), whatever the Jobs said yet."""
    return any(g.get("name") == "tfhelm.io/workers-admitted" for g in pod["spec"].get("schedulingGates") or [])


@pytest.fixture(scope="session")
def training_cpu(core, nodes) -> Decimal:
    """The training nodes' allocatable CPU, together."""
    return sum(parse_quantity(core.read_node(n).status.allocatable["cpu"]) for n in nodes.training)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def values_yaml(values: dict) -> str:
    return yaml.safe_dump(values)
