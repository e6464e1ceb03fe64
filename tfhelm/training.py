"""When is a training done: the one rule that `tfhelm status`, `tfhelm up --wait`, the
reaper and `tfhelm list` apply to a cluster's Jobs (pure functions over V1Job objects)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# The reaper's completion conditions (`tfhelm reap --completion`, chart `reaper.completion`).
COMPLETIONS = ("auto", "all-workers", "chief", "worker-0")
# A Job whose pods only run TF servers that never exit (in-graph workers) may say so; the
# launcher's `server` argument is the fallback for charts that do not.
RUNS_ANNOTATION = "tfhelm.io/runs"


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
    ready: int = 0  # pods running and ready (the Job controller counts them: no pod list)


def job_rows(jobs) -> list[JobRow]:
    return sorted((job_row(job) for job in jobs), key=lambda r: r.name)


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
                  created_at=meta.creation_timestamp, deleting=bool(meta.deletion_timestamp),
                  ready=st.ready or 0)


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


def decisive_role(roles, completion: str = "auto") -> str:
    """The role whose end means training ended: for `auto` the chief if there is one
    (in-graph: the chief drives the cluster), else the workers. `roles`: those present."""
    if completion == "auto":
        return "chief" if "chief" in roles else "worker"
    return "chief" if completion == "chief" else "worker"


def decisive_job(jobs: list[JobRow], completion: str = "auto") -> JobRow | None:
    """The current Job of the decisive role (see `decisive_role`)."""
    by_role = current_jobs(jobs)
    return by_role.get(decisive_role(by_role, completion))


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


def training_state(jobs: list[JobRow]) -> str:
    """Complete, Failed, Running, or Serving (only servers: PS without Jobs)."""
    return training_done(jobs) or ("Running" if jobs else "Serving")
