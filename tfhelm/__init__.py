"""tfhelm: distributed TensorFlow on Kubernetes from a few parameters, as a command line
(`tfhelm`) and as a Python API (`tfhelm.up`, `tfhelm.get`, `tfhelm.Cluster`: tfhelm/api).

`import tfhelm` stays light (the CLI starts through it): the API's names load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tfhelm.api import (Cluster, JobStatus, NoCluster, Outcome, ParameterServers, QueueStatus, Refused,
                            SpecError, Status, TaskStatus, TfhelmError, TimedOut, TrainingFailed, UsageError,
                            get, list_clusters, render, tf_config, up)

__all__ = ["Cluster", "JobStatus", "NoCluster", "Outcome", "ParameterServers", "QueueStatus", "Refused",
           "SpecError", "Status", "TaskStatus", "TfhelmError", "TimedOut", "TrainingFailed", "UsageError", "get",
           "list_clusters", "render", "tf_config", "up"]


def __getattr__(name: str):
    if name in __all__:
        import tfhelm.api

        return getattr(tfhelm.api, name)
    raise AttributeError(f"module 'tfhelm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
