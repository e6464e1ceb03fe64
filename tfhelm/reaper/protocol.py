"""What the reaper's loop (tfhelm.reaper.loop) needs: a client for the cluster (ReapClient:
`tfhelm reap`'s in tfhelm.reaper.client, the in-cluster reaper's in tfhelm.reaper.incluster),
and the shape of a further rule the loop runs beside the reaping (Rule)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Iterator, Protocol

from tfhelm.cluster.training import JobRow, SucceededTasks


class ReapClient(Protocol):
    """What the loop needs from the cluster. Every action is idempotent."""

    def list_jobs(self, namespace: str, selector: str) -> tuple[list, str]:
        """The Jobs with these labels (read like client models: training.job_row reads them)
        and the list's resourceVersion."""

    def watch_jobs(self, namespace: str, selector: str, resource_version: str,
                   timeout: int) -> Iterator[tuple[str, object, str]]:
        """Yields (type, a Job as list_jobs gives them or None for bookmarks,
        resourceVersion); raises tfhelm.errors.Gone."""

    def list_pods(self, namespace: str, selector: str) -> tuple[list[dict], str]:
        """The metadata (the API's JSON) of the Succeeded pods with these labels."""

    def watch_pods(self, namespace: str, selector: str, resource_version: str,
                   timeout: int) -> Iterator[tuple[str, dict | None, str]]:
        """Pods turning Succeeded, as metadata (JSON); like watch_jobs."""

    def stop_watch(self) -> None:
        """End every watch, now and later."""

    def uninstall_ps(self, namespace: str, cluster: str) -> str | None:
        """Uninstall the cluster's PS release (`<name>-ps`); its name, None when there is none."""

    def delete_ps(self, namespace: str, cluster: str) -> list[str]:
        """Delete the cluster's PS Deployments and Services; what was deleted."""

    def suspend_job(self, namespace: str, name: str) -> bool: ...

    def delete_job(self, namespace: str, name: str) -> bool:
        """Delete a Job and its pods (a Kueue-queued cluster's in-graph workers); False when gone."""

    # The queue's gates (tfhelm.reaper.gates), for a Kueue-queued cluster.

    def list_gated_pods(self, namespace: str, selector: str) -> tuple[list[dict], str]:
        """The pods (whole, the API's JSON) of the gated roles with these labels."""

    def watch_gated_pods(self, namespace: str, selector: str, resource_version: str,
                         timeout: int) -> Iterator[tuple[str, dict | None, str]]: ...

    def open_gate(self, namespace: str, pod: str) -> bool:
        """Remove the queue's scheduling gate from a pod; False when it is gone."""

    def evict(self, namespace: str, pod: str) -> bool:
        """Evict a pod (its controller makes a gated one); False when it is gone."""

    def emit(self, namespace: str, job: JobRow, reason: str, message: str, warning: bool) -> bool:
        """Create the Event; False when it already existed."""

    def refused(self, error: Exception) -> Exception | None:
        """The error to stop with when retrying cannot cure `error` (401/403), else None."""


@dataclass(frozen=True)
class Source:
    """A list-then-watch a rule needs beyond the loop's own (Jobs, Succeeded pods), through
    the client: `list(client, namespace)` -> (objects as JSON, resourceVersion), `watch(client,
    namespace, resourceVersion, timeout)` -> (type, object or None, resourceVersion)."""
    list: Callable[[ReapClient, str], tuple[list[dict], str]]
    watch: Callable[[ReapClient, str, str, int], Iterator[tuple[str, dict | None, str]]]


@dataclass
class View:
    """What the loop knows when a rule decides: the clusters' Jobs (rows, by cluster), their
    decisive tasks' Succeeded pods, and each of the rules' sources' objects by uid."""
    namespace: str
    jobs: dict[str, list[JobRow]]
    pods: SucceededTasks
    objects: dict[str, dict[str, dict]] = field(default_factory=dict)


class Rule(Protocol):
    """A further decision the loop makes at every change, beside the reaping: `decide` is
    pure (the view and the clock -> the actions due now, hashable values); `act` carries one
    out through the client in the loop's pool, and returns a line to log or None (raise to
    have it retried after the backoff). An action is not started again while it runs, nor
    while `decide` keeps returning it after it was done; `sources` are watched for the rule
    (see Source). Make one, pass it in `Reaper(rules=[...])`, and add what its actions need
    to the client and to the in-cluster reaper's Role (docs/reaper.md, "Another rule")."""
    name: str
    sources: dict[str, Source]

    def decide(self, view: View, now: float) -> Iterable[Hashable]: ...

    def act(self, client: ReapClient, action: Hashable) -> str | None: ...
