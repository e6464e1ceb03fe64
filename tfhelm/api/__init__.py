"""The Python API: TF clusters from a notebook or a script, over the same core as the CLI.

    import tfhelm

    run = tfhelm.up("mnist", workers=4, ps=1, script="train.py")
    run.wait()                              # a live bar in Jupyter, bars on a terminal
    print(run.logs(task="worker:0"))
    run.reap()                              # the parameter servers go; Jobs and logs stay
    run.down()

    with tfhelm.up("nb", in_graph=True, workers=2, ps=1) as servers:
        strategy = servers.strategy()       # this process is the chief
        ...                                 # the servers are removed on exit

Errors are the CLI's, one class per exit code: TrainingFailed (1), UsageError (2, with
SpecError naming the option), NoCluster (3), TimedOut (4), Refused (5); all are TfhelmError.
Reference: docs/api.md."""

from tfhelm.api.clusters import Cluster, Outcome, get, list_clusters, render, up
from tfhelm.api.ingraph import tf_config
from tfhelm.api.status import JobStatus, ParameterServers, QueueStatus, Status, TaskStatus
from tfhelm.errors import (NoCluster, Refused, SpecError, TfhelmError, TimedOut, TrainingFailed,
                           UsageError)

__all__ = ["Cluster", "JobStatus", "NoCluster", "Outcome", "ParameterServers", "QueueStatus", "Refused",
           "SpecError", "Status", "TaskStatus", "TfhelmError", "TimedOut", "TrainingFailed", "UsageError", "get",
           "list_clusters", "render", "tf_config", "up"]
