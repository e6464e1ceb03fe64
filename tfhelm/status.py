"""What `tfhelm status` shows: pure functions over the cluster's objects."""

from __future__ import annotations

from dataclasses import dataclass

from tfhelm.kube import ClusterObjects
from tfhelm.spec import ROLES
from tfhelm.training import current_jobs, job_rows, training_state

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass
class TaskRow:
    task: str
    pod: str
    phase: str
    restarts: int
    node: str


def task_rows(objs: ClusterObjects) -> list[TaskRow]:
    """One row per TF task's pod (the in-cluster reaper's pod is not a task)."""
    rows = []
    for pod in objs.pods:
        labels, ann = pod.metadata.labels or {}, pod.metadata.annotations or {}
        role = labels.get("tfhelm.io/role", "?")
        if role not in ROLES:
            continue
        index = labels.get("tfhelm.io/task-index", ann.get(COMPLETION_INDEX, "?"))
        restarts = sum(c.restart_count for c in (pod.status.container_statuses or []))
        phase = "Terminating" if pod.metadata.deletion_timestamp else pod.status.phase
        rows.append(TaskRow(f"{role}:{index}", pod.metadata.name, phase, restarts,
                            pod.spec.node_name or "-"))
    order = {"chief": 0, "worker": 1, "ps": 2, "evaluator": 3}
    return sorted(rows, key=lambda r: (order.get(r.task.split(":")[0], 9),
                                       int(r.task.split(":")[1]) if r.task.split(":")[1].isdigit() else 0,
                                       r.pod))


def ps_state(objs: ClusterObjects) -> str:
    ps = [d for d in objs.deployments if (d.metadata.labels or {}).get("tfhelm.io/role") == "ps"]
    if not ps:
        return "no parameter servers (none configured, or reaped)"
    ready = sum(d.status.ready_replicas or 0 for d in ps)
    return f"{len(ps)} parameter server(s), {ready} ready: they run until reaped (`tfhelm reap`, or `tfhelm down`)"


def reaper_lines(events: list) -> list[str]:
    """The reaper's decisions (Kubernetes Events with reasons `TFCluster*`), oldest first."""
    rows = []
    for ev in events:
        if not (ev.reason or "").startswith("TFCluster"):
            continue
        when = ev.last_timestamp or ev.event_time or ev.metadata.creation_timestamp
        rows.append((when, f"reaper: {when:%Y-%m-%d %H:%M:%S} {ev.reason}: {ev.message}"))
    return [line for _, line in sorted(rows, key=lambda r: r[0])]


def ps_counts(objs: ClusterObjects) -> tuple[int, int]:
    """(parameter servers, ready ones)."""
    ps = [d for d in objs.deployments if (d.metadata.labels or {}).get("tfhelm.io/role") == "ps"]
    return len(ps), sum(d.status.ready_replicas or 0 for d in ps)


def report(namespace: str, name: str, objs: ClusterObjects, events: list) -> dict:
    """Everything `tfhelm status` shows, as plain data (for `-o json|yaml`)."""
    jobs = job_rows(objs.jobs)
    total, ready = ps_counts(objs)
    return {
        "namespace": namespace, "cluster": name, "training": training_state(jobs),
        "tasks": [{"task": r.task, "pod": r.pod, "phase": r.phase, "restarts": r.restarts,
                   "node": r.node} for r in task_rows(objs)],
        "jobs": [{"role": j.role, "name": j.name, "succeeded": j.succeeded, "failed": j.failed,
                  "total": j.total, "state": j.state} for j in jobs],
        "parameterServers": {"total": total, "ready": ready},
        "reaper": reaper_lines(events),
    }


@dataclass
class ClusterRow:
    namespace: str
    name: str
    workers: str  # succeeded/total
    ps: str  # ready/total
    chief: bool
    training: str


def cluster_rows(jobs: list, deployments: list) -> list[ClusterRow]:
    """One row per TF cluster found among Jobs and Deployments (V1 objects) labelled
    `tfhelm.io/cluster`: installed by tfhelm, plain Helm or GitOps alike."""
    groups: dict[tuple[str, str], ClusterObjects] = {}
    for kind, items in (("jobs", jobs), ("deployments", deployments)):
        for obj in items:
            cluster = (obj.metadata.labels or {}).get("tfhelm.io/cluster")
            if cluster:
                key = (obj.metadata.namespace, cluster)
                getattr(groups.setdefault(key, ClusterObjects([], [], [], [])), kind).append(obj)
    rows = []
    for (ns, name), objs in sorted(groups.items()):
        jrows = job_rows(objs.jobs)
        current = current_jobs(jrows)  # during an upgrade the old generation's Jobs linger
        worker = current.get("worker")
        total, ready = ps_counts(objs)
        rows.append(ClusterRow(ns, name, f"{worker.succeeded}/{worker.total}" if worker else "-",
                               f"{ready}/{total}", "chief" in current, training_state(jrows)))
    return rows
