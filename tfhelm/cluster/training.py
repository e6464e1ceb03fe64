"""When is a training done: the one rule that `tfhelm status`, `tfhelm up --wait`, the
reaper and `tfhelm list` apply to a cluster's Jobs and their Succeeded pods (pure functions
over V1Job objects and the pods' metadata).

Success is seen as early as anything says it: the Job's own early word (SuccessCriteriaMet,
or `succeeded == completions`, before `Complete`, which Kubernetes 1.31+ adds only once every
pod has terminated), or, before the Job controller has even synced (it batches pod events,
about 1 s per sync), a Succeeded pod for every index of the decisive Job. Failure stays the
Job controller's decision (podFailurePolicy, backoff limits, deadlines); its early word
FailureTarget counts as Failed. Standard library only: the in-cluster reaper runs this too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tfhelm import contract
from tfhelm.contract import CLUSTER_LABEL, QUEUE_LABEL, ROLE_LABEL

# The reaper's completion conditions (`tfhelm reap --completion`, chart `reaper.completion`).
COMPLETIONS = tuple(contract.contract()["reaper"]["completions"])
# The chart says on each Job what its tasks run: a Job of TF servers (in-graph workers) never
# finishes by itself.
RUNS_ANNOTATION = contract.annotation("runs")
SERVER = contract.task("modes")["server"]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"  # a Job's pods' label: its uid
# A Job's early words: it will end so, once its pods have terminated.
EARLY = {"SuccessCriteriaMet": "Complete", "FailureTarget": "Failed"}


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
    queue: str = ""  # the Kueue LocalQueue of a queued cluster's worker Job (`queue.name`)
    suspended_since: datetime | None = None  # when it was last suspended (its Suspended condition)


def job_rows(jobs) -> list[JobRow]:
    return sorted((job_row(job) for job in jobs), key=lambda r: r.name)


def job_row(job) -> JobRow:
    """One Job (a kubernetes V1Job) as the table and the reaper see it."""
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
        state = "Complete"  # counted, conditions not yet written; no server stamp yet
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


class SucceededTasks:
    """The indexes that have a Succeeded pod, per Job uid: what the pods say before the Job
    controller has counted them. Fed one pod at a time (a watch event costs O(1)); only ever
    grows for a Job (a Succeeded pod stays so), and forgets a Job that is gone."""

    def __init__(self) -> None:
        self._by_job: dict[str, set[int]] = {}

    def note(self, pod: dict) -> dict:
        """A full pod (the API's JSON, as `tfhelm status` lists them): added if it Succeeded,
        and returned, so one streaming pass over the pods does this and more."""
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            self.add(pod["metadata"])
        return pod

    def add(self, meta: dict) -> bool:
        """The metadata (JSON) of a pod known to have Succeeded; True if it told something new."""
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
    """(its Job's uid, its completion index) from a pod's metadata (JSON); None for a pod no
    Indexed Job owns."""
    labels = meta.get("labels") or {}
    owner = next((o["uid"] for o in meta.get("ownerReferences") or []
                  if o.get("kind") == "Job" and o.get("controller")), labels.get(CONTROLLER_UID))
    index = (meta.get("annotations") or {}).get(COMPLETION_INDEX) or labels.get(COMPLETION_INDEX)
    if not owner or index is None or not index.isdigit():
        return None
    return owner, int(index)


def tasks_succeeded(job: JobRow, pods: SucceededTasks | None = None) -> int:
    """A Job's succeeded tasks: its own counter, or more where the pods say so already."""
    return max(job.succeeded, min(pods.count(job.uid), job.total) if pods else 0)


def training_done(jobs: list[JobRow], completion: str = "auto",
                  pods: SucceededTasks | None = None) -> str | None:
    """The reaper's rule (see `decisive_job`; `worker-0` looks at worker task 0 only).
    Returns "Complete" or "Failed" once decided, else None. `pods`: the Succeeded pods seen
    so far (see the module's docstring); the Job's own word comes first."""
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
    """The Job's own state, else Complete once every index has a Succeeded pod."""
    if job.state == "Running" and pods and not job.suspended and pods.count(job.uid) >= job.total:
        return "Complete"
    return job.state


def training_state(jobs: list[JobRow], pods: SucceededTasks | None = None) -> str:
    """Complete, Failed, Running, Queued (its workers wait for Kueue's admission, or were
    preempted and wait again), or Serving (only servers: PS without Jobs)."""
    return training_done(jobs, pods=pods) or (("Queued" if queued(jobs) else "Running") if jobs else "Serving")


def queued(jobs: list[JobRow]) -> JobRow | None:
    """The current worker Job of a queued cluster while Kueue holds it (suspended)."""
    workers = current_jobs(jobs).get("worker")
    return workers if workers and workers.queue and workers.suspended and workers.state == "Running" else None
