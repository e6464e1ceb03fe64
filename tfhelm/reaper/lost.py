"""A further rule of the reaper (tfhelm.reaper.protocol.Rule): the tasks of a lost node are
started again elsewhere.

When a node stops answering, Kubernetes taints it `node.kubernetes.io/unreachable` (about
40 s after its last heartbeat) and, once a task's toleration ran out (the chart's
`nodeFailure.unreachableSeconds`), evicts it: the pod gets the condition DisruptionTarget
(reason DeletionByTaintManager) and a deletion with its grace period. Nobody finishes that
deletion but the node's own kubelet. A Deployment (a PS) replaces its pod at once; a Job
with `podReplacementPolicy: Failed` (the chart's: never two pods of one index) waits for the
pod to be Failed, which it never is while the node is away: a collective training hangs, a
PS training loses a worker's share for good.

This rule finishes what Kubernetes started. A pod of its cluster that the taint manager
evicted and that is still there OVERDUE seconds after its grace period ended (by then a live
kubelet has stopped it: this one does not answer) is removed for good: its Job's tracking
finalizer taken off, then the pod deleted with no grace, each request conditioned on its
uid. The Job creates the index again (the lost pod counts as neither failed nor succeeded, as
for a disruption), a Deployment's old pod leaves the API. It decides from the pods alone:
the taint manager has read the Nodes for it, so the reaper needs no cluster-wide permission
(a workspace user's Role could not grant one). Should the node come back, its old processes
stop: the launcher's fence (tfhelm.pod.fence) at once, the kubelet when it catches up.

Standard library only: the chart ships it with the in-cluster reaper.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

from tfhelm.contract import CLUSTER_LABEL
from tfhelm.reaper.protocol import Source, View

SOURCE = "live-pods"
# Pods not finished: a field selector, so the watch carries only those (a pod that finishes
# leaves it as a DELETED event).
LIVE = "status.phase!=Succeeded,status.phase!=Failed"
EVICTED_BY_TAINT = "DeletionByTaintManager"  # the DisruptionTarget reason of a NoExecute eviction
JOB_FINALIZER = "batch.kubernetes.io/job-tracking"
OVERDUE = 5.0  # seconds past the end of the grace period: a live kubelet is done by then


@dataclass(frozen=True)
class Replace:
    """Remove one lost pod for good (hashable: the loop runs each action once)."""
    name: str
    uid: str
    node: str
    finalizer: int | None  # index of the Job's tracking finalizer in metadata.finalizers


def compact(pod: dict) -> dict:
    """The few fields the rule reads of a pod (the loop keeps every live pod of the cluster)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    evicted = any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                  and c.get("reason") == EVICTED_BY_TAINT for c in status.get("conditions") or [])
    return {"metadata": {"uid": meta.get("uid"), "name": meta.get("name"),
                         "deletionTimestamp": meta.get("deletionTimestamp"),
                         "finalizers": meta.get("finalizers") or []},
            "node": (pod.get("spec") or {}).get("nodeName") or "", "evicted": evicted}


def overdue(pod: dict, now: float, margin: float = OVERDUE) -> bool:
    """Evicted by the taint manager and still there `margin` seconds after its grace ended."""
    deleting = pod["metadata"].get("deletionTimestamp")
    if not (pod.get("evicted") and deleting):
        return False
    end = datetime.fromisoformat(deleting.replace("Z", "+00:00")).timestamp()
    return now >= end + margin


class LostTasks:
    """The rule: `decide` lists the overdue pods of the cluster, `act` removes one."""

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


# When the cluster's namespace is deleted, Kubernetes (1.33+, ordered namespace deletion) deletes
# every pod first and the Jobs only once the pods are gone. But a Job with backoffLimitPerIndex
# keeps the tracking finalizer on an index's last failed pod until it has made the index's next
# pod, which a terminating namespace refuses (k8s.io/kubernetes pkg/controller/job,
# canRemoveFinalizer): the pods stay, the Jobs stay, the namespace stays Terminating. The
# reaper, stopped with them, finishes what the Job controller would: it takes the finalizer off
# its cluster's finished pods that are being deleted, until none is left or it is killed.
ENDING_POLL = 1.0  # seconds between two looks at the cluster's pods


def release_in_ending_namespace(client, namespace: str, cluster: str, me: str, until: float,
                                clock, sleep) -> list[str]:
    """The pods released (names); `me`: the reaper's own pod, `until`: a clock() bound."""
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
