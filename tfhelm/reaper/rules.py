"""The reaper's pure rules: its configuration, and what to do about one cluster now (Jobs +
configuration + clock -> one Decision). No I/O; when training is done is tfhelm.cluster.training's."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from tfhelm import contract
from tfhelm.chart import default_values
from tfhelm.cluster import training
from tfhelm.cluster.training import COMPLETIONS, JobRow
from tfhelm.errors import SpecError

if TYPE_CHECKING:
    from tfhelm.cluster.values import ClusterValues

POLICIES = tuple(contract.contract()["reaper"]["onFailure"])
# The chart's `reaper:` values are the defaults of the in-cluster reaper and of `tfhelm reap`.
DEFAULTS = default_values()["reaper"]
DEFAULT_GRACE = DEFAULTS["grace"]
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
    grace: float = DEFAULT_GRACE
    completion: str = DEFAULTS["completion"]
    on_failure: str = DEFAULTS["onFailure"]
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
    def of(cls, cluster: ClusterValues) -> "ReapConfig":
        """A cluster's `reaper:` section (validated when read: only `--reap` and the reaper
        need it, so a bad one does not stop the rest)."""
        return cls.from_section(cluster.effective.get("reaper") or {})

    @classmethod
    def from_section(cls, section: dict) -> "ReapConfig":
        """The chart's `reaper:` values (defaults already coalesced in: tfhelm.cluster.values)."""
        return cls(grace=section.get("grace", DEFAULT_GRACE),
                   completion=section.get("completion", DEFAULTS["completion"]),
                   on_failure=section.get("onFailure", DEFAULTS["onFailure"])).validate()


@dataclass(frozen=True)
class Decision:
    action: str  # WAIT, GRACE, REAP or KEEP
    cluster: str
    message: str  # a line a human can read: what holds and what happens
    job: JobRow | None = None  # the Job that decided; it gets the Event
    outcome: str | None = None  # "Complete" / "Failed" once decided
    due: float | None = None  # GRACE: epoch seconds when it turns into REAP
    stop_workers: str | None = None  # name of an in-graph worker Job to suspend

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
    since = [t for t in (observed, _server_time(job, cfg.completion)) if t is not None]
    due = min(since, default=now) + cfg.grace
    if now < due:
        return Decision(GRACE, cluster, f"{why}; parameter servers go at "
                        f"{_clock(due)} (grace {cfg.grace:g}s)", job, outcome, due, stop)
    return Decision(REAP, cluster, f"{why}; grace {cfg.grace:g}s passed", job, outcome, due, stop)


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
