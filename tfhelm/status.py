"""What `tfhelm status` shows: pure functions over the cluster's objects."""

from __future__ import annotations

from dataclasses import dataclass

from tfhelm.kube import ClusterObjects

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass
class TaskRow:
    task: str
    pod: str
    phase: str
    restarts: int
    node: str


@dataclass
class JobRow:
    role: str
    name: str
    succeeded: int
    failed: int
    total: int
    state: str  # Running, Complete, Failed


def task_rows(objs: ClusterObjects) -> list[TaskRow]:
    rows = []
    for pod in objs.pods:
        labels, ann = pod.metadata.labels or {}, pod.metadata.annotations or {}
        role = labels.get("tfhelm.io/role", "?")
        index = labels.get("tfhelm.io/task-index", ann.get(COMPLETION_INDEX, "?"))
        restarts = sum(c.restart_count for c in (pod.status.container_statuses or []))
        phase = "Terminating" if pod.metadata.deletion_timestamp else pod.status.phase
        rows.append(TaskRow(f"{role}:{index}", pod.metadata.name, phase, restarts,
                            pod.spec.node_name or "-"))
    order = {"chief": 0, "worker": 1, "ps": 2, "evaluator": 3}
    return sorted(rows, key=lambda r: (order.get(r.task.split(":")[0], 9),
                                       int(r.task.split(":")[1]) if r.task.split(":")[1].isdigit() else 0,
                                       r.pod))


def job_rows(objs: ClusterObjects) -> list[JobRow]:
    rows = []
    for job in objs.jobs:
        st = job.status
        conds = {c.type for c in (st.conditions or []) if c.status == "True"}
        state = "Complete" if "Complete" in conds else "Failed" if "Failed" in conds else "Running"
        rows.append(JobRow((job.metadata.labels or {}).get("tfhelm.io/role", "?"), job.metadata.name,
                           st.succeeded or 0, st.failed or 0, job.spec.completions or 1, state))
    return sorted(rows, key=lambda r: r.name)


def training_done(jobs: list[JobRow]) -> str | None:
    """The reaper's rule: the chief's Job if there is one, else the workers' Job.
    Returns "Complete" or "Failed" once decided, else None."""
    by_role = {j.role: j for j in jobs}
    decisive = by_role.get("chief") or by_role.get("worker")
    return decisive.state if decisive and decisive.state != "Running" else None


def ps_state(objs: ClusterObjects) -> str:
    ps = [d for d in objs.deployments if (d.metadata.labels or {}).get("tfhelm.io/role") == "ps"]
    if not ps:
        return "no parameter servers (none configured, or reaped)"
    ready = sum(d.status.ready_replicas or 0 for d in ps)
    return f"{len(ps)} parameter server(s), {ready} ready: they run until reaped (`tfhelm down`)"
