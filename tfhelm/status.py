"""What `tfhelm status` shows: pure functions over the cluster's objects."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tfhelm.kube import ClusterObjects
from tfhelm.spec import ROLES

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
# The reaper's completion conditions (`tfhelm reap --completion`, chart `reaper.completion`).
COMPLETIONS = ("auto", "all-workers", "chief", "worker-0")
# A Job whose pods only run TF servers that never exit (in-graph workers) may say so; the
# launcher's `server` argument is the fallback for charts that do not.
RUNS_ANNOTATION = "tfhelm.io/runs"


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
    # What the reaper needs beyond the table (defaults keep older callers working).
    cluster: str = ""
    uid: str = ""
    finished_at: datetime | None = None  # when it turned Complete or Failed (to the second)
    reason: str = ""  # why it failed: the Failed condition's reason and message
    completed_indexes: str = ""  # e.g. "0-3,5"
    failed_indexes: str = ""
    suspended: bool = False
    runs_server: bool = False  # its pods serve forever (in-graph workers): stopped on reap
    created_at: datetime | None = None
    deleting: bool = False  # an old generation's Job on its way out (upgrade, rollback)


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


def job_rows(objs: ClusterObjects) -> list[JobRow]:
    return sorted((job_row(job) for job in objs.jobs), key=lambda r: r.name)


def job_row(job) -> JobRow:
    """One Job (a kubernetes V1Job) as the table and the reaper see it."""
    st, meta = job.status, job.metadata
    conds = {c.type: c for c in (st.conditions or []) if c.status == "True"}
    state = "Complete" if "Complete" in conds else "Failed" if "Failed" in conds else "Running"
    finished, reason = None, ""
    if state == "Complete":
        finished = st.completion_time or conds["Complete"].last_transition_time
    elif state == "Failed":
        finished = conds["Failed"].last_transition_time
        reason = ": ".join(x for x in (conds["Failed"].reason, conds["Failed"].message) if x)
    labels = meta.labels or {}
    return JobRow(labels.get("tfhelm.io/role", "?"), meta.name, st.succeeded or 0, st.failed or 0,
                  job.spec.completions or 1, state, cluster=labels.get("tfhelm.io/cluster", ""),
                  uid=meta.uid or "", finished_at=finished, reason=reason,
                  completed_indexes=st.completed_indexes or "", failed_indexes=st.failed_indexes or "",
                  suspended=bool(job.spec.suspend), runs_server=_runs_server(job),
                  created_at=meta.creation_timestamp, deleting=bool(meta.deletion_timestamp))


def _runs_server(job) -> bool:
    runs = (job.metadata.annotations or {}).get(RUNS_ANNOTATION)
    if runs:
        return runs == "server"
    containers = job.spec.template.spec.containers or []
    return any((c.args or [])[:1] == ["server"] and any("launcher.py" in a for a in c.command or [])
               for c in containers)


def has_index(ranges: str, index: int) -> bool:
    """Is `index` in a Job's index list such as "0-3,5"?"""
    for part in filter(None, ranges.split(",")):
        lo, _, hi = part.partition("-")
        if int(lo) <= index <= int(hi or lo):
            return True
    return False


def decisive_job(jobs: list[JobRow], completion: str = "auto") -> JobRow | None:
    """The Job whose end means training ended: for `auto` the chief's if there is one
    (in-graph: the chief drives the cluster), else the workers'."""
    by_role = current_jobs(jobs)
    if completion == "auto":
        return by_role.get("chief") or by_role.get("worker")
    return by_role.get("chief" if completion == "chief" else "worker")


def current_jobs(jobs: list[JobRow]) -> dict[str, JobRow]:
    """{role: Job} of the cluster's current generation. During an upgrade or rollback the
    new generation's Jobs exist beside the old ones for a moment: the newest Job of a role
    that is not being deleted is the current one."""
    by_role: dict[str, JobRow] = {}
    order = lambda j: (not j.deleting, j.created_at.timestamp() if j.created_at else 0.0, j.name)  # noqa: E731
    for j in sorted(jobs, key=order):  # the last one of a role wins
        by_role[j.role] = j
    return by_role


def training_done(jobs: list[JobRow], completion: str = "auto") -> str | None:
    """The reaper's rule (see `decisive_job`; `worker-0` looks at worker task 0 only).
    Returns "Complete" or "Failed" once decided, else None."""
    decisive = decisive_job(jobs, completion)
    if decisive is None:
        return None
    if completion == "worker-0" and decisive.state == "Running":
        if has_index(decisive.completed_indexes, 0):
            return "Complete"
        if has_index(decisive.failed_indexes, 0):
            return "Failed"
    return decisive.state if decisive.state != "Running" else None


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


def training_state(jobs: list[JobRow]) -> str:
    """Complete, Failed, Running, or Serving (only servers: PS without Jobs)."""
    return training_done(jobs) or ("Running" if jobs else "Serving")


def report(namespace: str, name: str, objs: ClusterObjects, events: list) -> dict:
    """Everything `tfhelm status` shows, as plain data (for `-o json|yaml`)."""
    jobs = job_rows(objs)
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
        jrows = job_rows(objs)
        current = current_jobs(jrows)  # during an upgrade the old generation's Jobs linger
        worker = current.get("worker")
        total, ready = ps_counts(objs)
        rows.append(ClusterRow(ns, name, f"{worker.succeeded}/{worker.total}" if worker else "-",
                               f"{ready}/{total}", "chief" in current, training_state(jrows)))
    return rows
