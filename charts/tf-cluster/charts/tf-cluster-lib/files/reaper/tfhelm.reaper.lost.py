# tfhelm/reaper/lost.py without its prose (make chart-files)
from __future__ import annotations
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable
from tfhelm.contract import CLUSTER_LABEL
from tfhelm.reaper.protocol import Source, View
SOURCE = "live-pods"
LIVE = "status.phase!=Succeeded,status.phase!=Failed"
EVICTED_BY_TAINT = "DeletionByTaintManager"
JOB_FINALIZER = "batch.kubernetes.io/job-tracking"
OVERDUE = 5.0
@dataclass(frozen=True)
class Replace:
    name: str
    uid: str
    node: str
    finalizer: int | None
def compact(pod: dict) -> dict:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    evicted = any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                  and c.get("reason") == EVICTED_BY_TAINT for c in status.get("conditions") or [])
    return {"metadata": {"uid": meta.get("uid"), "name": meta.get("name"),
                         "deletionTimestamp": meta.get("deletionTimestamp"),
                         "finalizers": meta.get("finalizers") or []},
            "node": (pod.get("spec") or {}).get("nodeName") or "", "evicted": evicted}
def overdue(pod: dict, now: float, margin: float = OVERDUE) -> bool:
    deleting = pod["metadata"].get("deletionTimestamp")
    if not (pod.get("evicted") and deleting):
        return False
    end = datetime.fromisoformat(deleting.replace("Z", "+00:00")).timestamp()
    return now >= end + margin
class LostTasks:
    name = "lost tasks"
    def __init__(self, cluster: str, namespace: str, margin: float = OVERDUE):
        self.cluster, self.namespace, self.margin = cluster, namespace, margin
        selector = f"{CLUSTER_LABEL}={cluster}"
        self.sources = {SOURCE: Source(
            list=lambda client, ns: _compacted(*client.list_live_pods(ns, selector, LIVE)),
            watch=lambda client, ns, rv, timeout: (
                (kind, None if obj is None else compact(obj), version)
                for kind, obj, version in client.watch_live_pods(ns, selector, LIVE, rv, timeout)))}
    def decide(self, view: View, now: float) -> Iterable[Replace]:
        for pod in view.objects.get(SOURCE, {}).values():
            if overdue(pod, now, self.margin):
                meta = pod["metadata"]
                finalizers = meta["finalizers"]
                yield Replace(meta["name"], meta["uid"], pod["node"],
                              finalizers.index(JOB_FINALIZER) if JOB_FINALIZER in finalizers else None)
    def act(self, client, action: Replace) -> str:
        if action.finalizer is not None:
            client.remove_finalizer(self.namespace, action.name, action.uid, action.finalizer, JOB_FINALIZER)
        client.delete_pod_now(self.namespace, action.name, action.uid)
        return (f"removed pod {action.name}: evicted from node {action.node}, whose kubelet no longer "
                "answers; its Job or Deployment starts the task again")
def _compacted(items: list[dict], version: str) -> tuple[list[dict], str]:
    return [compact(p) for p in items], version
ENDING_POLL = 1.0
def release_in_ending_namespace(client, namespace: str, cluster: str, me: str, until: float,
                                clock, sleep) -> list[str]:
    released = []
    while clock() < until:
        pods, _ = client.list_live_pods(namespace, f"{CLUSTER_LABEL}={cluster}", "")
        others = [p for p in pods if p["metadata"]["name"] != me]
        if not others:
            break
        for pod in others:
            meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase")
            finalizers = meta.get("finalizers") or []
            if meta.get("deletionTimestamp") and phase in ("Failed", "Succeeded") and JOB_FINALIZER in finalizers:
                client.remove_finalizer(namespace, meta["name"], meta["uid"], finalizers.index(JOB_FINALIZER),
                                        JOB_FINALIZER)
                released.append(meta["name"])
        sleep(ENDING_POLL)
    return released
