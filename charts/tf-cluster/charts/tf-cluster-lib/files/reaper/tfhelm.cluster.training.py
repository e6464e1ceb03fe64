# tfhelm/cluster/training.py without its prose (make chart-files)
from __future__ import annotations
from dataclasses import dataclass
from datetime import datetime
from tfhelm import contract
from tfhelm.contract import CLUSTER_LABEL, QUEUE_LABEL, ROLE_LABEL
COMPLETIONS = tuple(contract.contract()["reaper"]["completions"])
RUNS_ANNOTATION = contract.annotation("runs")
SERVER = contract.task("modes")["server"]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
EARLY = {"SuccessCriteriaMet": "Complete", "FailureTarget": "Failed"}
@dataclass
class JobRow:
    role: str
    name: str
    succeeded: int
    failed: int
    total: int
    state: str
    cluster: str = ""
    uid: str = ""
    finished_at: datetime | None = None
    reason: str = ""
    completed_indexes: str = ""
    failed_indexes: str = ""
    suspended: bool = False
    runs_server: bool = False
    created_at: datetime | None = None
    deleting: bool = False
    ready: int = 0
    queue: str = ""
    suspended_since: datetime | None = None
def job_rows(jobs) -> list[JobRow]:
    return sorted((job_row(job) for job in jobs), key=lambda r: r.name)
def job_row(job) -> JobRow:
    st, meta = job.status, job.metadata
    conds = {c.type: c for c in (st.conditions or []) if c.status == "True"}
    suspended = bool(job.spec.suspend)
    said = next((c for c in ("Complete", "Failed", *EARLY) if c in conds), None)
    state = EARLY.get(said, said) or "Running"
    finished, reason = None, ""
    if said:
        finished = (st.completion_time if said == "Complete" else None) or conds[said].last_transition_time
        if state == "Failed":
            reason = ": ".join(x for x in (conds[said].reason, conds[said].message) if x)
    elif (st.succeeded or 0) >= (job.spec.completions or 1) and not job.spec.suspend:
        state = "Complete"
    labels = meta.labels or {}
    return JobRow(labels.get(ROLE_LABEL, "?"), meta.name, st.succeeded or 0, st.failed or 0,
                  job.spec.completions or 1, state, cluster=labels.get(CLUSTER_LABEL, ""),
                  uid=meta.uid or "", finished_at=finished, reason=reason,
                  completed_indexes=st.completed_indexes or "", failed_indexes=st.failed_indexes or "",
                  suspended=suspended, runs_server=_runs_server(job),
                  created_at=meta.creation_timestamp, deleting=bool(meta.deletion_timestamp),
                  ready=st.ready or 0, queue=labels.get(QUEUE_LABEL, ""),
                  suspended_since=(conds["Suspended"].last_transition_time if "Suspended" in conds
                                   else meta.creation_timestamp) if suspended else None)
def _runs_server(job) -> bool:
    return (job.metadata.annotations or {}).get(RUNS_ANNOTATION) == SERVER
def has_index(ranges: str, index: int) -> bool:
    for part in filter(None, ranges.split(",")):
        lo, _, hi = part.partition("-")
        if int(lo) <= index <= int(hi or lo):
            return True
    return False
def decisive_role(roles, completion: str = "auto") -> str:
    if completion == "auto":
        return "chief" if "chief" in roles else "worker"
    return "chief" if completion == "chief" else "worker"
def decisive_job(jobs: list[JobRow], completion: str = "auto") -> JobRow | None:
    by_role = current_jobs(jobs)
    return by_role.get(decisive_role(by_role, completion))
def current_jobs(jobs: list[JobRow]) -> dict[str, JobRow]:
    by_role: dict[str, JobRow] = {}
    order = lambda j: (not j.deleting, j.created_at.timestamp() if j.created_at else 0.0, j.name)
    for j in sorted(jobs, key=order):
        by_role[j.role] = j
    return by_role
class SucceededTasks:
    def __init__(self) -> None:
        self._by_job: dict[str, set[int]] = {}
    def note(self, pod: dict) -> dict:
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            self.add(pod["metadata"])
        return pod
    def add(self, meta: dict) -> bool:
        task = pod_task(meta)
        if task is None:
            return False
        done = self._by_job.setdefault(task[0], set())
        if task[1] in done:
            return False
        done.add(task[1])
        return True
    def forget(self, job_uid: str) -> None:
        self._by_job.pop(job_uid, None)
    def count(self, job_uid: str) -> int:
        return len(self._by_job.get(job_uid, ()))
    def has(self, job_uid: str, index: int) -> bool:
        return index in self._by_job.get(job_uid, ())
def pod_task(meta: dict) -> tuple[str, int] | None:
    labels = meta.get("labels") or {}
    owner = next((o["uid"] for o in meta.get("ownerReferences") or []
                  if o.get("kind") == "Job" and o.get("controller")), labels.get(CONTROLLER_UID))
    index = (meta.get("annotations") or {}).get(COMPLETION_INDEX) or labels.get(COMPLETION_INDEX)
    if not owner or index is None or not index.isdigit():
        return None
    return owner, int(index)
def tasks_succeeded(job: JobRow, pods: SucceededTasks | None = None) -> int:
    return max(job.succeeded, min(pods.count(job.uid), job.total) if pods else 0)
def training_done(jobs: list[JobRow], completion: str = "auto",
                  pods: SucceededTasks | None = None) -> str | None:
    decisive = decisive_job(jobs, completion)
    if decisive is None:
        return None
    state = job_state(decisive, pods)
    if completion == "worker-0" and state == "Running":
        if has_index(decisive.completed_indexes, 0) or (pods and pods.has(decisive.uid, 0)):
            return "Complete"
        if has_index(decisive.failed_indexes, 0):
            return "Failed"
    return state if state != "Running" else None
def job_state(job: JobRow, pods: SucceededTasks | None = None) -> str:
    if job.state == "Running" and pods and not job.suspended and pods.count(job.uid) >= job.total:
        return "Complete"
    return job.state
def training_state(jobs: list[JobRow], pods: SucceededTasks | None = None) -> str:
    return training_done(jobs, pods=pods) or (("Queued" if queued(jobs) else "Running") if jobs else "Serving")
def queued(jobs: list[JobRow]) -> JobRow | None:
    workers = current_jobs(jobs).get("worker")
    return workers if workers and workers.queue and workers.suspended and workers.state == "Running" else None
