"""Where a Kueue-queued cluster stands (chart `queue.name`; docs/queue.md), as `status`, `list`
and `up --wait` say it: Queued (why: the resource short and how much of it is in use, in
which queue), Admitted, Preempted (by which workload), Requeued, Finished. Pure: the worker
Job, its Kueue Workload (kueue.x-k8s.io/v1beta2, the API's JSON) and the ClusterQueue (when
readable) in, one QueueInfo out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from tfhelm.cluster.training import JobRow

QUEUED, ADMITTED, PREEMPTED, REQUEUED, FINISHED = "Queued", "Admitted", "Preempted", "Requeued", "Finished"
# Kueue's message while a Workload waits for quota (pkg/scheduler/flavorassigner).
_SHORT = re.compile(r"insufficient (?:unused )?quota for (?P<resource>[^ ]+) in flavor (?P<flavor>[^ ,]+)"
                    r"(?:, (?P<more>[^ ]+) more needed)?")
_PREEMPTOR = re.compile(r"\(UID: (?P<uid>[^,]+), JobUID: (?P<job>[^)]+)\) due to (?P<why>[^;]+)")


@dataclass(frozen=True)
class QueueInfo:
    state: str  # QUEUED, ADMITTED, PREEMPTED, REQUEUED or FINISHED
    local_queue: str
    cluster_queue: str  # "" until Kueue has admitted it once (or says which)
    line: str  # what holds, in one line
    since: datetime | None = None  # in this state since (the condition's time)
    preempted_by: str = ""  # the workload that preempted it (ns/name), when known
    workload: str = ""  # the cluster's Workload, ns/name

    def as_dict(self) -> dict:
        return {"state": self.state, "localQueue": self.local_queue, "clusterQueue": self.cluster_queue,
                "message": self.line, "since": self.since.isoformat() if self.since else None,
                "preemptedBy": self.preempted_by or None, "workload": self.workload or None}


def _conditions(workload: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (workload.get("status") or {}).get("conditions") or []}


def _true(conds: dict[str, dict], kind: str) -> dict | None:
    c = conds.get(kind)
    return c if c and c.get("status") == "True" else None


def _time(cond: dict | None) -> datetime | None:
    stamp = (cond or {}).get("lastTransitionTime")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


def _ago(since: datetime | None, now: datetime) -> str:
    if since is None:
        return ""
    s = max(0, int((now - since).total_seconds()))
    return f" for {s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f" for {s // 60}m{s % 60:02d}s" if s >= 60 else f" for {s}s"


def preempted(workload: dict | None) -> bool:
    """Was the Workload preempted (its Preempted condition True)?"""
    return bool(workload and _true(_conditions(workload), "Preempted"))


def cluster_queue_of(workload: dict | None) -> str:
    """The ClusterQueue a Workload was admitted to (or, for one that never was, '')."""
    return (((workload or {}).get("status") or {}).get("admission") or {}).get("clusterQueue") or ""


def info(job: JobRow, workload: dict | None, cluster_queue: dict | None, now: datetime,
         names: dict[str, str] | None = None) -> QueueInfo | None:
    """Where the queued cluster whose worker Job is `job` stands; None for a cluster without
    a queue. `cluster_queue`: the ClusterQueue (None if unknown or unreadable); `names`: the
    Workloads readable here, uid -> ns/name, to name a preemptor."""
    if not job.queue:
        return None
    lq = job.queue
    if workload is None:
        if not job.suspended:
            return QueueInfo(ADMITTED, lq, "", f"running without a Kueue Workload (is Kueue installed?) "
                             f"though labelled for LocalQueue {lq}")
        return QueueInfo(QUEUED, lq, "", f"waiting in LocalQueue {lq}: Kueue has made no Workload for "
                         f"Job {job.name} yet (is Kueue running?)", job.suspended_since)
    meta = workload["metadata"]
    where = f"{meta.get('namespace', '')}/{meta['name']}"
    conds = _conditions(workload)
    cq = cluster_queue_of(workload) or ((cluster_queue or {}).get("metadata") or {}).get("name", "")
    if finished := _true(conds, "Finished"):
        return QueueInfo(FINISHED, lq, cq, f"finished ({finished.get('reason', '')}); its quota is free",
                         _time(finished), workload=where)
    preempted = _true(conds, "Preempted")
    by, why = _preemptor(preempted, names or {})
    if (admitted := _true(conds, "Admitted")) and not _true(conds, "Evicted"):
        starting = " (its workers are starting)" if job.suspended else ""
        return QueueInfo(ADMITTED, lq, cq, f"admitted by ClusterQueue {cq}{_ago(_time(admitted), now)} "
                         f"(LocalQueue {lq}){starting}", _time(admitted), workload=where)
    if evicted := _true(conds, "Evicted"):
        if _true(conds, "QuotaReserved"):  # still holds its quota while its pods stop
            what = f"preempted by {by} ({why})" if preempted else f"evicted ({evicted.get('reason')}: {evicted.get('message')})"
            return QueueInfo(PREEMPTED if preempted else QUEUED, lq, cq, f"{what}: its tasks are stopping, "
                             "then it waits in the queue again", _time(evicted), by, where)
    pending = conds.get("QuotaReserved") or {}
    waiting = _waiting(pending.get("message") or "", cq, cluster_queue)
    requeued = _true(conds, "Requeued") if preempted or _true(conds, "Evicted") else None
    if requeued:
        since = _time(requeued)
        head = f"requeued after {f'preemption by {by} ({why})' if preempted else 'eviction'}"
        return QueueInfo(REQUEUED, lq, cq, f"{head}; waiting in LocalQueue {lq}{_ago(since, now)}: {waiting}",
                         since, by, where)
    since = _time(pending) or job.suspended_since
    return QueueInfo(QUEUED, lq, cq, f"waiting in LocalQueue {lq}{_ago(since, now)}: {waiting}", since,
                     workload=where)


def _preemptor(cond: dict | None, names: dict[str, str]) -> tuple[str, str]:
    """(who, why) from the Preempted condition's message."""
    m = _PREEMPTOR.search((cond or {}).get("message") or "")
    if not m:
        return "another workload", (cond or {}).get("reason") or "preemption"
    who = names.get(m["uid"]) or f"workload {m['uid']}"
    return who, m["why"].strip()


def _waiting(message: str, cq_name: str, cluster_queue: dict | None) -> str:
    """Kueue's reason, with the ClusterQueue's use of the short resource when readable:
    `waiting for cpu in ClusterQueue team (flavor default): 3.2 of 4 in use, 1.5 more needed`."""
    m = _SHORT.search(message)
    if not m:
        return message or "Kueue has not considered it yet"
    resource, flavor = m["resource"], m["flavor"]
    name = cq_name or ((cluster_queue or {}).get("metadata") or {}).get("name", "")
    text = f"waiting for {resource} in ClusterQueue {name} (flavor {flavor})" if name else \
        f"waiting for {resource} (flavor {flavor})"
    used = _usage(cluster_queue, flavor, resource)
    if used:
        text += f": {used[0]} of {used[1]} in use"
    if m["more"]:
        text += f"{',' if used else ':'} {m['more']} more needed"
    return text


def _usage(cluster_queue: dict | None, flavor: str, resource: str) -> tuple[str, str] | None:
    """(in use, nominal quota) of a resource of a flavor in a ClusterQueue's status and spec."""
    if not cluster_queue:
        return None
    used = nominal = None
    for f in (cluster_queue.get("status") or {}).get("flavorsUsage") or []:
        if f.get("name") == flavor:
            used = next((r.get("total") for r in f.get("resources") or [] if r.get("name") == resource), None)
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for f in group.get("flavors") or []:
            if f.get("name") == flavor:
                nominal = next((r.get("nominalQuota") for r in f.get("resources") or []
                                if r.get("name") == resource), None)
    if nominal is None:
        return None
    return _quantity(used or "0"), _quantity(nominal)


def _quantity(q) -> str:
    """`3200m` -> `3.2` (CPU reads best in cores); other quantities as Kubernetes writes them."""
    text = str(q)
    if text.endswith("m") and text[:-1].isdigit():
        return f"{Decimal(text[:-1]) / 1000:f}".rstrip("0").rstrip(".") or "0"
    return text
