"""The reaper: parameter servers go away once training is done, and nothing is lost.

TensorFlow parameter servers block in `server.join()` forever, and so do the workers of an
in-graph cluster. The reaper watches a cluster's Jobs and, once the completion condition
holds and the grace period passed, uninstalls the PS release `<name>-ps` (or, for a cluster
installed as one release or by a GitOps tool without Helm, deletes the PS Deployments and
Services directly) and suspends an in-graph worker Job so its servers stop. PVCs, finished
Jobs (their pods' logs) and checkpoints stay. On failure the policy decides: keep the PS
for debugging (default) or reap anyway.

The modules, as everywhere in tfhelm:
  * `rules`: pure; Jobs + Succeeded pods + configuration + clock -> one Decision
    (`decide()`). When training is done is tfhelm.cluster.training's rule; this adds the grace
    period and the failure policy.
  * `loop`: the `Reaper`. Two feeds (tfhelm.cluster.feed: a list-then-watch in a
    background thread that resumes from the last resourceVersion, lists again on 410 Gone
    and backs off when the API server is away) per cluster (or per namespace, for many
    clusters): its Jobs, and its decisive role's Succeeded pods, so a training is seen done
    at the last task's pod event, before the Job controller has counted it. The main thread
    keeps timers for grace periods and runs side effects in small pools: deletes first, Helm
    after, so one cluster's `helm uninstall` never delays another cluster's deletes. Further
    rules (`protocol.Rule`: a pure decision and an action) run beside the reaping.
  * `protocol`: what the loop needs from a client, and a further rule's shape.
  * `client`: the side effects of `tfhelm reap` (`KubeReapClient`: Helm, and the Kubernetes
    API through Kube); `incluster`: the in-cluster reaper, the same loop and rules with the
    standard library's HTTP to the API server (tfhelm.pod.apiserver), run by the chart with
    the task image's own Python.
  * `console`: the reaper at a console (`tfhelm reap`, `tfhelm up --reap`); `metrics`: its
    Prometheus metrics.

`rules`, `loop`, `protocol`, `incluster` and `metrics` use the standard library only: the
chart ships them (hack/chart-files.py). Idempotent by construction: every action tolerates
"already done" (a release already gone, a 404, an Event that exists: Event names are
deterministic), and the grace period can count from the Job's end as the API server recorded
it, so a reaper killed at any point and restarted reaches the same end state, at the same time.
"""

from dataclasses import replace

from tfhelm.reaper.client import Gone, KubeReapClient
from tfhelm.reaper.loop import WATCH_SECONDS, Reaper
from tfhelm.reaper.protocol import ReapClient, Rule, Source, View
from tfhelm.reaper.rules import (EVENT_SOURCE, GRACE, KEEP, POLICIES, REAP, REASON_KEPT, REASON_REAPED,
                                 REASON_REAPING, TIMESTAMP_RESOLUTION, WAIT, Decision, ReapConfig, Result,
                                 decide, event_name)

__all__ = [
    "EVENT_SOURCE", "GRACE", "KEEP", "POLICIES", "REAP", "REASON_KEPT", "REASON_REAPED", "REASON_REAPING",
    "TIMESTAMP_RESOLUTION", "WAIT", "WATCH_SECONDS", "Decision", "Gone", "KubeReapClient", "ReapClient",
    "ReapConfig", "Reaper", "Result", "Rule", "Source", "View", "decide", "default_config", "event_name",
]


def default_config(**changes) -> ReapConfig:
    """The chart's `reaper:` values (the in-cluster reaper's defaults, and `tfhelm reap`'s),
    with `changes` (ReapConfig's fields)."""
    from tfhelm.chart import default_values

    return replace(ReapConfig.from_section(default_values()["reaper"]), **changes).validate()
