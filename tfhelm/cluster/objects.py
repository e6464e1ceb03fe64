"""Which of the API's objects are a TF cluster's, read and deleted through Kube: the
objects labelled with its name (CLUSTER_LABEL), its task pods, the Jobs and Deployments of
every TF cluster (ROLE_LABEL), the Events the reaper records on them, and where its pods ran.

Pods are the API's JSON, paged (a cluster may have 100,000); Jobs, Deployments, PVCs and
Events are few and read like client models (JsonObject) by the pure code (training, report)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

from tfhelm.contract import CLUSTER_LABEL, ROLE_LABEL
from tfhelm.errors import Forbidden, TimedOut
from tfhelm.jsonobject import JsonObject
from tfhelm.pod.apiserver import METADATA_LIST, SUCCEEDED

if TYPE_CHECKING:  # passed in; importing it costs the kubernetes client
    from tfhelm.kube import Kube


def selector(cluster: str) -> str:
    """The label selector of a cluster's objects."""
    return f"{CLUSTER_LABEL}={cluster}"


@dataclass
class ClusterObjects:
    pods: list  # the API's JSON (dicts), as `task_pods` yields them
    jobs: list  # JsonObjects from here on (read like client models)
    deployments: list
    pvcs: list


class ListedObjects(ClusterObjects):
    """A cluster's objects, each kind listed on first access: a caller that reads only the
    Jobs does not pay for listing every pod."""

    def __init__(self, listers: dict[str, Callable[[], list]]):  # no dataclass fields yet
        self._listers = listers

    def __getattr__(self, kind: str):  # only called while `kind` is not yet an attribute
        lister = self.__dict__.get("_listers", {}).get(kind)
        if lister is None:
            raise AttributeError(kind)
        setattr(self, kind, lister())
        return getattr(self, kind)


def of(kube: Kube, namespace: str, cluster: str) -> ClusterObjects:
    """A cluster's pods, Jobs, Deployments and PVCs, each kind listed when first read."""
    def listed(kind: str) -> Callable[[], list[JsonObject]]:
        return lambda: [JsonObject(o) for o in kube.items(kind, namespace, selector(cluster))]
    return ListedObjects({"pods": lambda: list(task_pods(kube, namespace, cluster)), "jobs": listed("Job"),
                          "deployments": listed("Deployment"), "pvcs": listed("PersistentVolumeClaim")})


def task_pods(kube: Kube, namespace: str, cluster: str) -> Iterator[dict]:
    """A cluster's pods (JSON), paged: one page in memory at a time."""
    return kube.each("Pod", namespace, selector(cluster))


def workloads(kube: Kube, namespace: str, cluster: str) -> tuple[list[JsonObject], list[JsonObject]]:
    """A cluster's Jobs and Deployments: a handful of objects whatever its size."""
    return _workloads(kube, namespace, selector(cluster))


def tf_workloads(kube: Kube, namespace: str | None) -> tuple[list[JsonObject], list[JsonObject]]:
    """Jobs and Deployments of every TF cluster in a namespace (None: all namespaces)."""
    return _workloads(kube, namespace, CLUSTER_LABEL)


def _workloads(kube: Kube, namespace: str | None, labels: str) -> tuple[list[JsonObject], list[JsonObject]]:
    return ([JsonObject(j) for j in kube.items("Job", namespace, labels)],
            [JsonObject(d) for d in kube.items("Deployment", namespace, labels)])


def tf_succeeded_pods(kube: Kube, namespace: str | None) -> Iterator[dict]:
    """The metadata (JSON) of every TF cluster's Succeeded chief and worker pods in a
    namespace (None: all namespaces), paged."""
    return kube.each("Pod", namespace, f"{CLUSTER_LABEL},{ROLE_LABEL} in (chief,worker)", fields=SUCCEEDED,
                     accept=METADATA_LIST)


def events_of(kube: Kube, namespace: str, kind: str, name: str) -> list[JsonObject]:
    """The Events about one object (the reaper records its decisions on a Job)."""
    return [JsonObject(e) for e in kube.items(
        "Event", namespace, fields=f"involvedObject.kind={kind},involvedObject.name={name}")]


def pvc_names(kube: Kube, namespace: str, cluster: str) -> set[str]:
    """The cluster's PVCs (by label: a PVC someone else makes meanwhile is not ours)."""
    return {p.metadata.name for p in of(kube, namespace, cluster).pvcs}


def delete_pvcs(kube: Kube, namespace: str, cluster: str) -> list[str]:
    """Delete the cluster's PVCs; those deleted."""
    return [p.metadata.name for p in of(kube, namespace, cluster).pvcs
            if kube.delete_pvc(namespace, p.metadata.name)]


def delete_jobs(kube: Kube, namespace: str, cluster: str, names: list[str] | None = None,
                timeout: float = 120) -> list[str]:
    """Delete a cluster's Jobs (all, or those named) and wait until they are gone, their
    pods first (foreground deletion): no old task runs beside a new one."""
    names = [j.metadata.name for j in of(kube, namespace, cluster).jobs] if names is None else names
    for name in names:
        kube.delete("Job", namespace, name, "Foreground")
    deadline = time.monotonic() + timeout
    while {j.metadata.name for j in of(kube, namespace, cluster).jobs} & set(names):
        if time.monotonic() > deadline:
            raise TimedOut(f"Jobs {', '.join(names)} of {namespace}/{cluster} still exist after {timeout}s")
        time.sleep(0.5)
    return names


def ran_only_on_simulated_nodes(kube: Kube, namespace: str, cluster: str) -> bool:
    """Did the cluster's pods run on simulated (kwok) nodes only, where no container
    runs? False when none was scheduled. Two lists of at most one pod each, by field
    selector (`up --wait` asks at the end: a pass over 1,024 pods took 0.3 s)."""
    def any_pod(*nodes: str) -> bool:
        fields = ",".join(f"spec.nodeName!={n}" for n in ("", *nodes))  # scheduled, not on these
        return next(kube.each("Pod", namespace, selector(cluster), fields=fields, accept=METADATA_LIST, page=1),
                    None) is not None
    if not any_pod():
        return False
    try:
        fake = [n["metadata"]["name"] for n in kube.each("Node", None, accept=METADATA_LIST)
                if (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake"]
    except Forbidden:  # a namespace's account (a workspace's notebook) sees no nodes: say real
        return False
    return not any_pod(*fake)
