# tfhelm/reaper/protocol.py without its prose (make chart-files)
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Iterator, Protocol
from tfhelm.cluster.training import JobRow, SucceededTasks
class ReapClient(Protocol):
    def list_jobs(self, namespace: str, selector: str) -> tuple[list, str]:
        pass
    def watch_jobs(self, namespace: str, selector: str, resource_version: str,
                   timeout: int) -> Iterator[tuple[str, object, str]]:
        pass
    def list_pods(self, namespace: str, selector: str) -> tuple[list[dict], str]:
        pass
    def watch_pods(self, namespace: str, selector: str, resource_version: str,
                   timeout: int) -> Iterator[tuple[str, dict | None, str]]:
        pass
    def stop_watch(self) -> None:
        pass
    def uninstall_ps(self, namespace: str, cluster: str) -> str | None:
        pass
    def delete_ps(self, namespace: str, cluster: str) -> list[str]:
        pass
    def suspend_job(self, namespace: str, name: str) -> bool: ...
    def delete_job(self, namespace: str, name: str) -> bool:
        pass
    def list_gated_pods(self, namespace: str, selector: str) -> tuple[list[dict], str]:
        pass
    def watch_gated_pods(self, namespace: str, selector: str, resource_version: str,
                         timeout: int) -> Iterator[tuple[str, dict | None, str]]: ...
    def open_gate(self, namespace: str, pod: str) -> bool:
        pass
    def evict(self, namespace: str, pod: str) -> bool:
        pass
    def emit(self, namespace: str, job: JobRow, reason: str, message: str, warning: bool) -> bool:
        pass
    def refused(self, error: Exception) -> Exception | None:
        pass
@dataclass(frozen=True)
class Source:
    list: Callable[[ReapClient, str], tuple[list[dict], str]]
    watch: Callable[[ReapClient, str, str, int], Iterator[tuple[str, dict | None, str]]]
@dataclass
class View:
    namespace: str
    jobs: dict[str, list[JobRow]]
    pods: SucceededTasks
    objects: dict[str, dict[str, dict]] = field(default_factory=dict)
class Rule(Protocol):
    name: str
    sources: dict[str, Source]
    def decide(self, view: View, now: float) -> Iterable[Hashable]: ...
    def act(self, client: ReapClient, action: Hashable) -> str | None: ...
