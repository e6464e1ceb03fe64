# tfhelm/reaper/gates.py without its prose (make chart-files)
from __future__ import annotations
from dataclasses import dataclass, field
from tfhelm.cluster import training
from tfhelm.cluster.training import JobRow
from tfhelm.contract import CLUSTER_LABEL, GATED_ROLES, QUEUE_GATE, ROLE_LABEL
from tfhelm.reaper.protocol import ReapClient, Source, View
OPEN, CLOSE = "open", "close"
TERMINAL = ("Succeeded", "Failed")
@dataclass(frozen=True)
class GatedPod:
    name: str
    uid: str
    cluster: str
    role: str
    gated: bool
    stopping: bool
    namespace: str = ""
@dataclass(frozen=True)
class GateAction:
    action: str
    pod: GatedPod
    why: str
    def __str__(self) -> str:
        return f"{self.action} the gate of pod {self.pod.name}"
def gated_pod(pod: dict) -> GatedPod | None:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    labels = meta.get("labels") or {}
    role = labels.get(ROLE_LABEL)
    if role not in GATED_ROLES or not labels.get(CLUSTER_LABEL):
        return None
    gates = {g.get("name") for g in spec.get("schedulingGates") or []}
    stopping = bool(meta.get("deletionTimestamp")) or (pod.get("status") or {}).get("phase") in TERMINAL
    return GatedPod(meta["name"], meta["uid"], labels[CLUSTER_LABEL], role, QUEUE_GATE in gates, stopping,
                    meta.get("namespace", ""))
def decide_gates(jobs: list[JobRow], pods: list[GatedPod], done: bool) -> list[GateAction]:
    workers = training.current_jobs(jobs).get("worker")
    if workers is None or workers.deleting:
        return []
    if not workers.suspended:
        why = f"the workers' Job {workers.name} was admitted" if workers.queue else f"Job {workers.name} is not queued"
        return [GateAction(OPEN, p, why) for p in pods if p.gated and not p.stopping]
    if done:
        return []
    why = f"the workers' Job {workers.name} is suspended (queued, or preempted and requeued)"
    return [GateAction(CLOSE, p, why) for p in pods if not p.gated and not p.stopping]
@dataclass(eq=False)
class GateRule:
    selector: str
    completion: str = "auto"
    name: str = "gates"
    sources: dict[str, Source] = field(init=False)
    @classmethod
    def of(cls, cluster: str | None, completion: str = "auto") -> "GateRule":
        return cls(f"{CLUSTER_LABEL}={cluster}" if cluster else CLUSTER_LABEL, completion)
    def __post_init__(self):
        selector = f"{self.selector},{ROLE_LABEL} in ({','.join(GATED_ROLES)})"
        self.sources = {"gated": Source(
            list=lambda client, ns: client.list_gated_pods(ns, selector),
            watch=lambda client, ns, rv, timeout: client.watch_gated_pods(ns, selector, rv, timeout))}
    def decide(self, view: View, now: float) -> list[GateAction]:
        by_cluster: dict[str, list[GatedPod]] = {}
        for pod in view.objects.get("gated", {}).values():
            row = gated_pod(pod)
            if row is not None:
                by_cluster.setdefault(row.cluster, []).append(row)
        actions = []
        for cluster, pods in sorted(by_cluster.items()):
            jobs = view.jobs.get(cluster, [])
            done = training.training_done(jobs, self.completion, view.pods) is not None
            actions += decide_gates(jobs, pods, done)
        return actions
    def act(self, client: ReapClient, action: GateAction) -> str | None:
        pod = action.pod
        if action.action == OPEN:
            done, verb = client.open_gate(pod.namespace, pod.name), "opened the gate of"
        else:
            done, verb = client.evict(pod.namespace, pod.name), "closed the gate of (evicted)"
        return f"{pod.cluster}: {verb} {pod.role} pod {pod.name}: {action.why}" if done else None
