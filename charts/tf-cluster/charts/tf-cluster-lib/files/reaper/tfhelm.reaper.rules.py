# tfhelm/reaper/rules.py without its prose (make chart-files)
from __future__ import annotations
from dataclasses import dataclass, field
from datetime import datetime, timezone
from tfhelm import contract
from tfhelm.cluster import training
from tfhelm.cluster.training import COMPLETIONS, JobRow
from tfhelm.errors import SpecError
POLICIES = tuple(contract.contract()["reaper"]["onFailure"])
REASON_REAPING = "TFClusterReaping"
REASON_REAPED = "TFClusterReaped"
REASON_KEPT = "TFClusterKept"
EVENT_SOURCE = "tfhelm-reaper"
TIMESTAMP_RESOLUTION = 1.0
WAIT, GRACE, REAP, KEEP = "wait", "grace", "reap", "keep"
@dataclass(frozen=True)
class ReapConfig:
    grace: float
    completion: str
    on_failure: str
    delete_directly: bool = False
    def validate(self) -> "ReapConfig":
        if self.grace < 0:
            raise SpecError("--grace", f"must be 0 or more seconds, got {self.grace}")
        if self.completion not in COMPLETIONS:
            raise SpecError("--completion", f"'{self.completion}' is not a completion condition",
                            f"use one of {', '.join(COMPLETIONS)}")
        if self.on_failure not in POLICIES:
            raise SpecError("--on-failure", f"'{self.on_failure}' is not a policy", "use keep or reap")
        return self
    @classmethod
    def from_section(cls, section: dict) -> "ReapConfig":
        return cls(grace=section["grace"], completion=section["completion"],
                   on_failure=section["onFailure"]).validate()
@dataclass(frozen=True)
class Decision:
    action: str
    cluster: str
    message: str
    job: JobRow | None = None
    outcome: str | None = None
    due: float | None = None
    stop_workers: str | None = None
    stop_by_delete: bool = False
    @property
    def key(self) -> tuple:
        return (self.cluster, self.job.uid if self.job else "", self.outcome)
@dataclass
class Result:
    cluster: str
    action: str
    outcome: str
    message: str
    removed: list[str] = field(default_factory=list)
def decide(cluster: str, jobs: list[JobRow], cfg: ReapConfig, now: float,
           observed: float | None = None, pods: training.SucceededTasks | None = None) -> Decision:
    job = training.decisive_job(jobs, cfg.completion)
    if job is None:
        have = ", ".join(sorted(j.name for j in jobs)) or "none"
        wanted = "chief" if cfg.completion == "chief" else "worker"
        return Decision(WAIT, cluster, f"no {wanted} Job (completion '{cfg.completion}'; Jobs: {have})")
    outcome = training.training_done(jobs, cfg.completion, pods)
    what = f"worker task 0 of Job {job.name}" if _by_task_0(job, cfg.completion) else f"Job {job.name}"
    if outcome is None:
        return Decision(WAIT, cluster, f"waiting: {job.role} {training.tasks_succeeded(job, pods)}/{job.total} succeeded"
                        + (f", {job.failed} failed" if job.failed else ""), job)
    if outcome == "Complete":
        why = f"training complete ({what} succeeded)"
    else:
        why = f"training failed ({what} failed{': ' + job.reason if job.reason else ''})"
        if cfg.on_failure == "keep":
            return Decision(KEEP, cluster, f"{why}; keeping the parameter servers for debugging "
                            f"(--on-failure keep); remove them with `tfhelm reap {cluster} "
                            f"--on-failure reap` or `tfhelm down {cluster}`", job, outcome)
    stop = serving_workers(jobs)
    by_delete = bool(stop and training.current_jobs(jobs)["worker"].queue)
    since = [t for t in (observed, _server_time(job, cfg.completion)) if t is not None]
    due = min(since, default=now) + cfg.grace
    if now < due:
        return Decision(GRACE, cluster, f"{why}; parameter servers go at "
                        f"{_clock(due)} (grace {cfg.grace:g}s)", job, outcome, due, stop, by_delete)
    return Decision(REAP, cluster, f"{why}; grace {cfg.grace:g}s passed", job, outcome, due, stop, by_delete)
def serving_workers(jobs: list[JobRow]) -> str | None:
    workers = training.current_jobs(jobs).get("worker")
    return (workers.name if workers and workers.runs_server and workers.state == "Running"
            and not workers.suspended else None)
def never_finishes(jobs: list[JobRow], cfg: ReapConfig) -> bool:
    workers = training.current_jobs(jobs).get("worker")
    return bool(workers and workers.runs_server and cfg.completion in ("all-workers", "worker-0"))
def _by_task_0(job: JobRow, completion: str) -> bool:
    return completion == "worker-0" and job.state == "Running"
def _server_time(job: JobRow, completion: str) -> float | None:
    if job.finished_at is None or _by_task_0(job, completion):
        return None
    return job.finished_at.timestamp() + TIMESTAMP_RESOLUTION
def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S UTC")
def event_name(job: JobRow, reason: str) -> str:
    return f"{job.name}.{reason.lower()}.{job.uid[:8]}"
def event(namespace: str, job: JobRow, reason: str, message: str, warning: bool, instance: str,
          now: datetime) -> dict:
    involved = {"apiVersion": "batch/v1", "kind": "Job", "name": job.name, "namespace": namespace, "uid": job.uid}
    return _event(event_name(job, reason), namespace, involved, {contract.CLUSTER_LABEL: job.cluster}, reason,
                  message, warning, instance, now)
def stopping_event(namespace: str, instance: str, now: datetime) -> dict:
    involved = {"apiVersion": "v1", "kind": "Pod", "name": instance, "namespace": namespace}
    return _event(f"{instance}.reaper-stopping"[:253], namespace, involved, {}, "ReaperStopping",
                  "the reaper was told to stop", False, instance, now)
def _event(name: str, namespace: str, involved: dict, labels: dict, reason: str, message: str, warning: bool,
           instance: str, now: datetime) -> dict:
    stamp = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace, **({"labels": labels} if labels else {})},
        "involvedObject": involved,
        "reason": reason, "message": message[:1024], "type": "Warning" if warning else "Normal",
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "source": {"component": EVENT_SOURCE},
        "reportingComponent": "tfhelm.io/reaper", "reportingInstance": instance[:128]}
def ps_selector(cluster: str) -> str:
    return f"{contract.CLUSTER_LABEL}={cluster},{contract.ROLE_LABEL}=ps"
