"""What `tfhelm status` shows: pure functions over the cluster's objects, and `collect`, which
fetches them cheaply (pods as paged JSON, never decoded into client models) and returns them as a report.
A cluster of more than FULL_LISTING tasks is summarized: counts per phase, then the exceptions."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Iterable

from tfhelm.cluster import objects, queue
from tfhelm.cluster.queue import QueueInfo
from tfhelm.cluster.spec import ROLES
from tfhelm.contract import CLUSTER_LABEL, KUEUE_JOB_UID, ROLE_LABEL, TASK_INDEX_LABEL
from tfhelm.cluster.training import (COMPLETION_INDEX, JobRow, SucceededTasks, current_jobs, job_row,
                                     job_rows, job_state, tasks_succeeded, training_state)

FULL_LISTING = 20  # up to this many tasks, the table lists every one
EXCEPTIONS_SHOWN = 20  # beyond it, this many of the exceptions are listed
ERRORS_SHOWN = 5  # distinct error lines shown (every task's is in -o json)
MAIN_CONTAINER = "tensorflow"
HEALTHY = ("Running", "Succeeded")
ROLE_ORDER = {"chief": 0, "worker": 1, "ps": 2, "evaluator": 3}
PHASE_ORDER = ("Pending", "Running", "Succeeded", "Failed", "Terminating", "Unknown")


@dataclass
class TaskRow:
    """One task's pod (`tfhelm.TaskStatus`): `worker:3`, its pod, phase, restarts, node, why
    it is not well (`reason`) and why it failed in its own words (`error`)."""

    task: str
    pod: str
    phase: str
    restarts: int
    node: str
    reason: str = ""  # why a pod is not well (CrashLoopBackOff, ImagePullBackOff, Error, Evicted)
    error: str = ""  # why it failed, in the task's own words (see `_error`)

    @property
    def role(self) -> str:
        """chief, worker, ps or evaluator."""
        return self.task.split(":")[0]


def task_row(pod: dict) -> TaskRow | None:
    """A pod (the API's JSON) as a task row; None for a pod that is no TF task (the reaper)."""
    meta, st = pod["metadata"], pod.get("status") or {}
    labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
    role = labels.get(ROLE_LABEL, "?")
    if role not in ROLES:
        return None
    index = labels.get(TASK_INDEX_LABEL, ann.get(COMPLETION_INDEX, "?"))
    containers = st.get("containerStatuses") or []
    phase = "Terminating" if meta.get("deletionTimestamp") else st.get("phase") or "Unknown"
    return TaskRow(f"{role}:{index}", meta["name"], phase, sum(c.get("restartCount", 0) for c in containers),
                   (pod.get("spec") or {}).get("nodeName") or "-", _reason(st, containers),
                   _error((st.get("initContainerStatuses") or []) + containers))


def _error(containers: list[dict]) -> str:
    """The last line of the termination message of the first container that exited non-zero
    (now, or before its restart): the launcher writes the task's one-line reason there (the
    last line of the script's traceback, pip's error), and Kubernetes falls back to the log's
    last lines (terminationMessagePolicy FallbackToLogsOnError). An init container is named."""
    for c in containers:
        for state in ("state", "lastState"):
            done = (c.get(state) or {}).get("terminated") or {}
            if done.get("exitCode"):
                lines = [ln.strip() for ln in (done.get("message") or "").splitlines() if ln.strip()]
                where = "" if c.get("name") == MAIN_CONTAINER else f"{c.get('name')}: "
                return f"{where}{lines[-1] if lines else 'no message'} (exit {done['exitCode']})"
    return ""


def _reason(st: dict, containers: list[dict]) -> str:
    """kubectl's STATUS when it is not the phase: an init container that failed or waits
    (`Init:Error`), a container waiting or terminated with a reason, else the pod's own."""
    for c in st.get("initContainerStatuses") or []:
        state = c.get("state") or {}
        done, waiting = state.get("terminated") or {}, state.get("waiting") or {}
        if done.get("exitCode"):
            return f"Init:{done.get('reason') or 'Error'}"
        if waiting.get("reason") and waiting["reason"] != "PodInitializing":
            return f"Init:{waiting['reason']}"
    for c in containers:
        for state in ("waiting", "terminated"):
            why = ((c.get("state") or {}).get(state) or {}).get("reason")
            if why and why != "Completed":
                return why
    return st.get("reason") or ""


def failure(st: dict) -> str:
    """Why a task's pod failed, in the failed container's own words: its name and the last
    line of its termination message (the chart's fetch-code init container gives the end of
    its log, e.g. "fetch http://…/train.py: HTTP Error 404: Not Found"), else its exit code."""
    for kind in ("initContainerStatuses", "containerStatuses"):
        for c in st.get(kind) or []:
            state = c.get("state") or {}
            done = state.get("terminated")
            if done is None and "waiting" in state:  # restarting: why it stopped the last time
                done = (c.get("lastState") or {}).get("terminated")
            if done and done.get("exitCode"):
                lines = [ln.strip() for ln in (done.get("message") or "").splitlines() if ln.strip()]
                code = f"exit code {done['exitCode']}" + (f" ({done['reason']})" if done.get("reason") else "")
                return f"{c['name']}: {lines[-1] if lines else code}"
    return ""


def task_rows(pods: Iterable[dict]) -> list[TaskRow]:
    """One row per TF task's pod, in task order (the in-cluster reaper's pod is no task)."""
    rows = [r for r in map(task_row, pods) if r is not None]

    def order(r: TaskRow):
        index = r.task.split(":")[1]
        return ROLE_ORDER.get(r.role, 9), int(index) if index.isdigit() else 0, r.pod
    return sorted(rows, key=order)


def phase_counts(rows: list[TaskRow]) -> dict[str, dict[str, int]]:
    """{role: {phase: tasks}}, roles in task order, phases in lifecycle order."""
    counts: dict[str, Counter] = {}
    for r in rows:
        counts.setdefault(r.role, Counter())[r.phase] += 1
    rank = {p: i for i, p in enumerate(PHASE_ORDER)}
    return {role: {p: n for p, n in sorted(c.items(), key=lambda pn: (rank.get(pn[0], len(rank)), pn[0]))}
            for role, c in counts.items()}


def exceptions(rows: list[TaskRow]) -> list[TaskRow]:
    """The tasks worth a look: not Running or Succeeded, or restarted."""
    return [r for r in rows if r.phase not in HEALTHY or r.restarts]


def error_lines(rows: list[TaskRow], shown: int = ERRORS_SHOWN) -> list[str]:
    """The tasks' errors, each distinct one once with the tasks that had it (a retried task
    leaves a failed pod per attempt), in task order."""
    by_error: dict[str, list[TaskRow]] = {}
    for r in rows:
        if r.error:
            by_error.setdefault(r.error, []).append(r)
    lines = []
    for error, where in list(by_error.items())[:shown]:
        tasks = list(dict.fromkeys(r.task for r in where))
        names = ", ".join(tasks[:3]) + (f" and {len(tasks) - 3} more" if len(tasks) > 3 else "")
        pods = f", {len(where)} pods" if len(where) > len(tasks) else ""
        lines.append(f"error of {names}{pods}: {error}")
    if len(by_error) > shown:
        lines.append(f"... {len(by_error) - shown} more distinct errors (-o json has every task's)")
    return lines


def ps_state(total: int, ready: int) -> str:
    if not total:
        return "no parameter servers (none configured, or reaped)"
    return f"{total} parameter server(s), {ready} ready: they run until reaped (`tfhelm reap`, or `tfhelm down`)"


def reaper_lines(events: list) -> list[str]:
    """The reaper's decisions (Kubernetes Events with reasons `TFCluster*`), oldest first."""
    rows = []
    for ev in events:
        if not (ev.reason or "").startswith("TFCluster"):
            continue
        when = ev.last_timestamp or ev.event_time or ev.metadata.creation_timestamp
        rows.append((when, f"reaper: {when:%Y-%m-%d %H:%M:%S} {ev.reason}: {ev.message}"))
    return [line for _, line in sorted(rows, key=lambda r: r[0])]


JOB_ROLES_ANNOTATION = "tfhelm.io/job-roles"  # on PS Deployments: the roles the cluster has Jobs of


def gone_jobs(jobs: list, deployments: list) -> list[str]:
    """The roles whose Job the cluster's parameter servers say it has, and that are gone
    (deleted, or removed by their ttlSecondsAfterFinished): the PS serve on for nothing."""
    expected = {role for d in deployments
                for role in ((d.metadata.annotations or {}).get(JOB_ROLES_ANNOTATION) or "").split(",") if role}
    present = {(j.metadata.labels or {}).get(ROLE_LABEL) for j in jobs}
    return sorted(expected - present)


def state_of(jobs: list, gone: list[str], pods: SucceededTasks | None = None) -> str:
    """The training's state (training.training_state), or `Deleted` when a Job it had is gone."""
    return "Deleted" if gone else training_state(job_rows(jobs), pods)


def ps_counts(deployments: list) -> tuple[int, int]:
    """(parameter servers, ready ones) among a cluster's Deployments (V1Deployment)."""
    ps = [d for d in deployments if (d.metadata.labels or {}).get(ROLE_LABEL) == "ps"]
    return len(ps), sum(d.status.ready_replicas or 0 for d in ps)


def report(namespace: str, name: str, tasks: list[TaskRow], jobs: list, deployments: list,
           events: list, pods: SucceededTasks | None = None, gone: list[str] = (),
           queued: QueueInfo | None = None) -> dict:
    """Everything `tfhelm status` shows, as plain data (for `-o json|yaml`): every task,
    whatever the cluster's size, for scripts. `pods`: the Succeeded ones (training.py's rule);
    `queued`: where a Kueue-queued cluster stands."""
    rows = job_rows(jobs)
    total, ready = ps_counts(deployments)
    return {**({"queue": queued.as_dict()} if queued else {}),
        "namespace": namespace, "cluster": name, "training": state_of(jobs, gone, pods),
        "goneJobs": list(gone),
        "tasks": [asdict(t) for t in tasks],
        "phases": phase_counts(tasks),
        "jobs": [{"role": j.role, "name": j.name, "succeeded": tasks_succeeded(j, pods), "failed": j.failed,
                  "total": j.total, "state": job_state(j, pods)} for j in rows],
        "parameterServers": {"total": total, "ready": ready},
        "reaper": reaper_lines(events),
    }


def collect(kube, namespace: str, name: str, installed) -> dict:
    """`tfhelm status` and `Cluster.status()`: the report of a cluster, read cheaply (pods as
    paged JSON); a usage error when there is no such cluster."""
    from tfhelm.errors import SpecError

    jobs, deployments = objects.workloads(kube, namespace, name)
    done = SucceededTasks()
    tasks = task_rows(map(done.note, objects.task_pods(kube, namespace, name)))
    if not (tasks or jobs or deployments or installed.ps or installed.workload):
        raise SpecError("NAME", f"no TF cluster '{name}' in namespace {namespace}", "see `tfhelm list -n NAMESPACE`")
    gone = [] if installed.interrupted else gone_jobs(jobs, deployments)  # never made, then
    return report(namespace, name, tasks, jobs, deployments, job_events(kube, namespace, jobs), done, gone,
                  queue_info(kube, namespace, job_rows(jobs)))


def queue_info(kube, namespace: str, jobs: list[JobRow], now: datetime | None = None) -> QueueInfo | None:
    """Where a queued cluster stands (tfhelm.cluster.queue): its Workload, the Workloads of
    the namespace (to name a preemptor) and its ClusterQueue, as far as the caller may read
    them (a tenant may not read ClusterQueues: then Kueue's own message says why it waits)."""
    from tfhelm.errors import Forbidden

    workers = current_jobs(jobs).get("worker")
    if workers is None or not workers.queue:
        return None
    workload, names, cq_name, cluster_queue = None, {}, "", None
    try:
        every = kube.job_workloads(namespace)
        names = {w["metadata"]["uid"]: f"{namespace}/{w['metadata']['name']}" for w in every}
        mine = [w for w in every if (w["metadata"].get("labels") or {}).get(KUEUE_JOB_UID) == workers.uid]
        workload = max(mine, key=lambda w: w["metadata"].get("creationTimestamp", ""), default=None)
        if queue.preempted(workload):  # by a workload of another namespace too (a cohort's)?
            try:
                names.update({w["metadata"]["uid"]: f"{w['metadata']['namespace']}/{w['metadata']['name']}"
                              for w in kube.job_workloads(None)})
            except Forbidden:
                pass
        cq_name = queue.cluster_queue_of(workload)
        if not cq_name:
            cq_name = ((kube.read_local_queue(namespace, workers.queue) or {}).get("spec") or {}).get("clusterQueue", "")
        cluster_queue = kube.read_cluster_queue(cq_name) if cq_name else None
    except Forbidden:
        pass
    return queue.info(workers, workload, cluster_queue, now or datetime.now(timezone.utc), names)


def job_events(kube, namespace: str, jobs: list) -> list:
    """The Events on a cluster's Jobs (the reaper records its decisions there): one small
    list per Job."""
    return [ev for job in jobs for ev in objects.events_of(kube, namespace, "Job", job.metadata.name)]


@dataclass
class ClusterRow:
    namespace: str
    name: str
    workers: str  # succeeded/total
    ps: str  # ready/total
    chief: bool
    training: str
    queue: str = ""  # a queued cluster's LocalQueue and where it stands (tfhelm.cluster.queue)


CHART_LABEL = "helm.sh/chart"  # tf-cluster's objects: `tf-cluster-<version>`


def cluster_rows(jobs: list, deployments: list, pods: SucceededTasks | None = None) -> list[ClusterRow]:
    """One row per TF cluster found among Jobs and Deployments (V1 objects) of the
    tf-cluster chart, labelled `tfhelm.io/cluster`: installed by tfhelm, plain Helm or GitOps
    alike (every way keeps the chart's labels). Other charts' objects with that label are
    no TF clusters. `pods`: the Succeeded pods (training.py's rule)."""
    groups: dict[tuple[str, str], dict[str, list]] = {}
    for kind, items in (("jobs", jobs), ("deployments", deployments)):
        for obj in items:
            labels = obj.metadata.labels or {}
            cluster = labels.get(CLUSTER_LABEL)
            if cluster and labels.get(CHART_LABEL, "").startswith("tf-cluster-"):
                key = (obj.metadata.namespace, cluster)
                groups.setdefault(key, {"jobs": [], "deployments": []})[kind].append(obj)
    rows = []
    for (ns, name), objs in sorted(groups.items()):
        jrows = job_rows(objs["jobs"])
        current = current_jobs(jrows)  # during an upgrade the old generation's Jobs linger
        worker = current.get("worker")
        total, ready = ps_counts(objs["deployments"])
        gone = gone_jobs(objs["jobs"], objs["deployments"])
        state = f"Deleted ({', '.join(gone)} Job)" if gone else training_state(jrows, pods)
        rows.append(ClusterRow(ns, name, f"{tasks_succeeded(worker, pods)}/{worker.total}" if worker else "-",
                               f"{ready}/{total}", "chief" in current, state))
    return rows


def list_clusters(kube, namespace: str | None) -> list[ClusterRow]:
    """`tfhelm list`: the rows from the Jobs and Deployments; while some training runs, its
    Succeeded pods too (metadata only), so the rule is the one status and the reaper apply;
    with queued clusters, the namespace's Kueue Workloads (one list)."""
    jobs, deployments = objects.tf_workloads(kube, namespace)
    rows = cluster_rows(jobs, deployments)
    if any(r.training == "Running" for r in rows):
        done = SucceededTasks()
        for pod in objects.tf_succeeded_pods(kube, namespace):
            done.add(pod["metadata"])
        rows = cluster_rows(jobs, deployments, done)
    queued = {(j.metadata.namespace, j.metadata.uid): r for j in jobs
              if (r := job_row(j)).queue and r.role == "worker"}
    if queued:
        from tfhelm.errors import Forbidden
    
        try:
            workloads = {(w["metadata"]["namespace"], (w["metadata"].get("labels") or {}).get(KUEUE_JOB_UID)): w
                         for w in kube.job_workloads(namespace)}
        except Forbidden:
            workloads = {}
        now = datetime.now(timezone.utc)
        by_cluster = {(key[0], r.cluster): queue.info(r, workloads.get(key), None, now)
                      for key, r in queued.items()}
        for row in rows:
            if (q := by_cluster.get((row.namespace, row.name))) and row.training not in ("Complete", "Failed"):
                row.queue = f"{q.local_queue}: {q.state}, {q.line}" if q.state != queue.ADMITTED else \
                    f"{q.local_queue}: {q.state}"
    return rows
