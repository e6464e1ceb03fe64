"""The reaper's pure rules: its configuration, and what to do about one cluster now (Jobs +
configuration + clock -> one Decision), and the Event that records it. No I/O; when training
is done is tfhelm.cluster.training's. Standard library only: the in-cluster reaper runs this
in the task image (the chart ships it), and `tfhelm reap` runs the same."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from tfhelm import contract
from tfhelm.cluster import training
from tfhelm.cluster.training import COMPLETIONS, JobRow
from tfhelm.errors import SpecError

POLICIES = tuple(contract.contract()["reaper"]["onFailure"])
# Event reasons, on the Job that decided (the chief's, or the workers').
REASON_REAPING = "TFClusterReaping"  # condition holds; grace period running
REASON_REAPED = "TFClusterReaped"
REASON_KEPT = "TFClusterKept"  # failed, --on-failure keep
EVENT_SOURCE = "tfhelm-reaper"
# Server timestamps are whole seconds: a Job that finished at 12:00:00.9 says 12:00:00.
TIMESTAMP_RESOLUTION = 1.0

WAIT, GRACE, REAP, KEEP = "wait", "grace", "reap", "keep"


@dataclass(frozen=True)
class ReapConfig:
    """The chart's `reaper:` values are its defaults (tfhelm.reaper.default_config)."""
    grace: float
    completion: str
    on_failure: str
    # Delete PS Deployments/Services directly, never through Helm (one-release clusters;
    # the in-cluster reaper of such a cluster has no permission on Helm's Secrets).
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
        """A `reaper:` section of the chart's values, with the chart's defaults coalesced in
        (validated when read: only `--reap` and the reaper need it, so a bad one does not
        stop the rest)."""
        return cls(grace=section["grace"], completion=section["completion"],
                   on_failure=section["onFailure"]).validate()


@dataclass(frozen=True)
class Decision:
    action: str  # WAIT, GRACE, REAP or KEEP
    cluster: str
    message: str  # a line a human can read: what holds and what happens
    job: JobRow | None = None  # the Job that decided; it gets the Event
    outcome: str | None = None  # "Complete" / "Failed" once decided
    due: float | None = None  # GRACE: epoch seconds when it turns into REAP
    stop_workers: str | None = None  # name of an in-graph worker Job to suspend
    # ... deleted instead when it is queued: Kueue starts a suspended Job of an admitted
    # Workload again, and patching the Workload would need a right that raises priorities.
    stop_by_delete: bool = False

    @property
    def key(self) -> tuple:
        """One training run's decision: acted on once per reaper process."""
        return (self.cluster, self.job.uid if self.job else "", self.outcome)


@dataclass
class Result:
    """What the reaper did about one training run."""
    cluster: str
    action: str  # REAP or KEEP
    outcome: str  # Complete / Failed
    message: str
    removed: list[str] = field(default_factory=list)


def decide(cluster: str, jobs: list[JobRow], cfg: ReapConfig, now: float,
           observed: float | None = None, pods: training.SucceededTasks | None = None) -> Decision:
    """What to do about one cluster now (`pods`: the Succeeded pods seen, see training.py).

    `observed` is when this reaper first saw the outcome. The grace period runs from the
    earlier of that and the Job's end as the API server stamped it (whole seconds, so
    rounded up): both are at or after the real end, so the grace is never cut short, and a
    reaper restarted mid-grace continues it instead of starting it again.
    """
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
    """The current worker Job if its pods only serve (in-graph) and still run: suspended on
    reap, so its servers stop too."""
    workers = training.current_jobs(jobs).get("worker")
    return (workers.name if workers and workers.runs_server and workers.state == "Running"
            and not workers.suspended else None)


def never_finishes(jobs: list[JobRow], cfg: ReapConfig) -> bool:
    """In-graph workers only serve and never exit: a completion that waits for them waits
    forever."""
    workers = training.current_jobs(jobs).get("worker")
    return bool(workers and workers.runs_server and cfg.completion in ("all-workers", "worker-0"))


def _by_task_0(job: JobRow, completion: str) -> bool:
    """`worker-0` decided by task 0 while the Job still runs (its other tasks do)."""
    return completion == "worker-0" and job.state == "Running"


def _server_time(job: JobRow, completion: str) -> float | None:
    # worker-0 finishing is not stamped on the Job; then only `observed` counts.
    if job.finished_at is None or _by_task_0(job, completion):
        return None
    return job.finished_at.timestamp() + TIMESTAMP_RESOLUTION


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S UTC")


def event_name(job: JobRow, reason: str) -> str:
    """Deterministic, so emitting an Event twice (a restarted reaper) is a no-op."""
    return f"{job.name}.{reason.lower()}.{job.uid[:8]}"


def event(namespace: str, job: JobRow, reason: str, message: str, warning: bool, instance: str,
          now: datetime) -> dict:
    """The Event that records a decision, on the Job that decided."""
    involved = {"apiVersion": "batch/v1", "kind": "Job", "name": job.name, "namespace": namespace, "uid": job.uid}
    return _event(event_name(job, reason), namespace, involved, {contract.CLUSTER_LABEL: job.cluster}, reason,
                  message, warning, instance, now)


def stopping_event(namespace: str, instance: str, now: datetime) -> dict:
    """The Event of the reaper's pod (`instance`) told to stop: the API server refuses it in a
    namespace being deleted, which is how the reaper learns that."""
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
    """The labels of a cluster's PS Deployments and Services: what a reap deletes."""
    return f"{contract.CLUSTER_LABEL}={cluster},{contract.ROLE_LABEL}=ps"
