"""What `Cluster.status()` returns: the facts `tfhelm status -o json` prints, as dataclasses
(built from the one report, tfhelm.cluster.report.report)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tfhelm.cluster.report import TaskRow as TaskStatus

__all__ = ["JobStatus", "ParameterServers", "QueueStatus", "Status", "TaskStatus"]


@dataclass(frozen=True)
class JobStatus:
    """One Job of the cluster (chief, worker or evaluator tasks)."""

    role: str
    name: str
    succeeded: int
    failed: int
    total: int
    state: str  # Running, Complete, Failed, Serving, Replaced


@dataclass(frozen=True)
class ParameterServers:
    """The cluster's parameter servers: how many, and how many are ready."""

    total: int
    ready: int


@dataclass(frozen=True)
class QueueStatus:
    """Where a cluster queued in Kueue stands: Queued, Admitted, Preempted, Requeued or
    Finished, in its LocalQueue (and ClusterQueue, once known), `message` saying what holds."""

    state: str
    local_queue: str
    cluster_queue: str
    message: str
    since: str | None = None  # ISO time the state began
    preempted_by: str | None = None  # namespace/name of the Workload that preempted it
    workload: str | None = None  # the cluster's Kueue Workload, namespace/name

    @classmethod
    def from_report(cls, data: dict) -> QueueStatus:
        return cls(data["state"], data["localQueue"], data["clusterQueue"], data["message"], data["since"],
                   data["preemptedBy"], data["workload"])

    def to_dict(self) -> dict:
        return {"state": self.state, "localQueue": self.local_queue, "clusterQueue": self.cluster_queue,
                "message": self.message, "since": self.since, "preemptedBy": self.preempted_by,
                "workload": self.workload}


@dataclass(frozen=True)
class Status:
    """A TF cluster now: its training state (Complete, Failed, Running, Serving, Pending
    before any Job, or Deleted when a Job it had is gone: `gone_jobs` names their roles), every task (`TaskStatus`: task, pod, phase, restarts, node, reason,
    error), the tasks per role and phase, the Jobs, the parameter servers and the reaper's
    decisions."""

    namespace: str
    cluster: str
    training: str
    tasks: list[TaskStatus]
    phases: dict[str, dict[str, int]]
    jobs: list[JobStatus]
    parameter_servers: ParameterServers
    reaper: list[str]
    gone_jobs: list[str] = field(default_factory=list)
    queue: QueueStatus | None = None  # a cluster queued in Kueue (`tfhelm up --queue`)
    # Set when only the parameter servers' release exists (an install that did not finish).
    interrupted: str = field(default="", compare=False)

    @property
    def done(self) -> bool:
        """The training is decided (Complete or Failed)."""
        return self.training in ("Complete", "Failed")

    @classmethod
    def from_report(cls, data: dict, interrupted: str = "") -> Status:
        return cls(data["namespace"], data["cluster"], data["training"],
                   [TaskStatus(**t) for t in data["tasks"]], data["phases"],
                   [JobStatus(**j) for j in data["jobs"]], ParameterServers(**data["parameterServers"]),
                   list(data["reaper"]), list(data["goneJobs"]),
                   QueueStatus.from_report(data["queue"]) if "queue" in data else None, interrupted)

    def to_dict(self) -> dict:
        """Exactly what `tfhelm status -o json` prints."""
        return {**({"queue": self.queue.to_dict()} if self.queue else {}), "namespace": self.namespace, "cluster": self.cluster, "training": self.training,
                "goneJobs": list(self.gone_jobs), "tasks": [asdict(t) for t in self.tasks], "phases": self.phases,
                "jobs": [asdict(j) for j in self.jobs],
                "parameterServers": asdict(self.parameter_servers), "reaper": list(self.reaper)}
