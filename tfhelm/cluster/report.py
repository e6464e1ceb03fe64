"""What `tfhelm status` shows: pure functions over the cluster's objects, and `show`, which
fetches them cheaply (pods as paged JSON, never decoded into client models) and prints them.
A cluster of more than FULL_LISTING tasks is summarized: counts per phase, then the exceptions."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Iterable

from tfhelm.cluster.spec import ROLES
from tfhelm.contract import CLUSTER_LABEL, ROLE_LABEL, TASK_INDEX_LABEL
from tfhelm.kube import ClusterObjects
from tfhelm.cluster.training import (COMPLETION_INDEX, SucceededTasks, current_jobs, job_rows, job_state,
                             tasks_succeeded, training_state)

FULL_LISTING = 20  # up to this many tasks, the table lists every one
EXCEPTIONS_SHOWN = 20  # beyond it, this many of the exceptions are listed
ERRORS_SHOWN = 5  # distinct error lines shown (every task's is in -o json)
MAIN_CONTAINER = "tensorflow"
HEALTHY = ("Running", "Succeeded")
ROLE_ORDER = {"chief": 0, "worker": 1, "ps": 2, "evaluator": 3}
PHASE_ORDER = ("Pending", "Running", "Succeeded", "Failed", "Terminating", "Unknown")


@dataclass
class TaskRow:
    task: str
    pod: str
    phase: str
    restarts: int
    node: str
    reason: str = ""  # why a pod is not well (CrashLoopBackOff, ImagePullBackOff, Error, Evicted)
    error: str = ""  # why it failed, in the task's own words (see `_error`)

    @property
    def role(self) -> str:
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


def ps_state(deployments: list) -> str:
    total, ready = ps_counts(deployments)
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


def ps_counts(deployments: list) -> tuple[int, int]:
    """(parameter servers, ready ones) among a cluster's Deployments (V1Deployment)."""
    ps = [d for d in deployments if (d.metadata.labels or {}).get(ROLE_LABEL) == "ps"]
    return len(ps), sum(d.status.ready_replicas or 0 for d in ps)


def report(namespace: str, name: str, tasks: list[TaskRow], jobs: list, deployments: list,
           events: list, pods: SucceededTasks | None = None) -> dict:
    """Everything `tfhelm status` shows, as plain data (for `-o json|yaml`): every task,
    whatever the cluster's size, for scripts. `pods`: the Succeeded ones (training.py's rule)."""
    rows = job_rows(jobs)
    total, ready = ps_counts(deployments)
    return {
        "namespace": namespace, "cluster": name, "training": training_state(rows, pods),
        "tasks": [asdict(t) for t in tasks],
        "phases": phase_counts(tasks),
        "jobs": [{"role": j.role, "name": j.name, "succeeded": tasks_succeeded(j, pods), "failed": j.failed,
                  "total": j.total, "state": job_state(j, pods)} for j in rows],
        "parameterServers": {"total": total, "ready": ready},
        "reaper": reaper_lines(events),
    }


def show(kube, namespace: str, name: str, installed, fmt: str, every_task: bool = False) -> str:
    """`tfhelm status`: fetch, then print as `fmt` (table, json, yaml). Returns the training
    state (Complete, Failed, Running, Serving): the command's exit code depends on it."""
    from tfhelm.console import err
    from tfhelm.errors import SpecError
    from tfhelm.output import emit

    jobs, deployments = kube.workloads(namespace, name)
    done = SucceededTasks()
    tasks = task_rows(map(done.note, kube.task_pods(namespace, name)))
    if not (tasks or jobs or deployments or installed.ps or installed.workload):
        raise SpecError("NAME", f"no TF cluster '{name}' in namespace {namespace}", "see `tfhelm list -n NAMESPACE`")
    if installed.interrupted:
        err.print(installed.interrupted_line(), style="yellow", markup=False, highlight=False, soft_wrap=True)
    events = job_events(kube, namespace, jobs)
    if fmt != "table":
        emit(report(namespace, name, tasks, jobs, deployments, events, done), fmt)
    else:
        print_table(namespace, name, tasks, jobs, deployments, events, every_task, done)
    return training_state(job_rows(jobs), done)


def job_events(kube, namespace: str, jobs: list) -> list:
    """The Events on a cluster's Jobs (the reaper records its decisions there): one small
    list per Job."""
    return [ev for job in jobs for ev in kube.events_of(namespace, "Job", job.metadata.name)]


def print_table(namespace: str, name: str, tasks: list[TaskRow], jobs: list, deployments: list,
                events: list, every_task: bool = False, pods: SucceededTasks | None = None) -> None:
    """The people's view: every task of a small cluster (or with `every_task`); of a larger
    one the Jobs, the tasks per role and phase, and the exceptions (bounded)."""
    from tfhelm.console import out
    from tfhelm.output import table

    rows = job_rows(jobs)

    def line(text: str) -> None:
        out.print(text, markup=False, highlight=False, soft_wrap=True)

    def task_table(shown: list[TaskRow], title: str = "") -> None:
        table(("TASK", "POD", "PHASE", "RESTARTS", "NODE"),
              [(r.task, r.pod, f"{r.phase} ({r.reason})" if r.reason else r.phase, r.restarts, r.node)
               for r in shown], title=title)

    title = f"TF cluster {namespace}/{name}"
    summarize = len(tasks) > FULL_LISTING and not every_task
    if not summarize:
        task_table(tasks, title)
    for j in rows:
        line(f"job {j.name}: {tasks_succeeded(j, pods)}/{j.total} succeeded, {j.failed} failed — {job_state(j, pods)}")
    if summarize:
        counts = phase_counts(tasks)
        phases = [p for p in PHASE_ORDER if any(p in c for c in counts.values())]
        phases += sorted({p for c in counts.values() for p in c} - set(phases))
        table(("ROLE", "TASKS", *(p.upper() for p in phases)),
              [(role, sum(c.values()), *(c.get(p, "") for p in phases)) for role, c in counts.items()],
              title=f"{title}: {len(tasks)} tasks")
        odd = exceptions(tasks)
        if odd:
            more = f", the first {EXCEPTIONS_SHOWN} below" if len(odd) > EXCEPTIONS_SHOWN else ""
            line(f"{len(odd)} of {len(tasks)} tasks not Running or Succeeded, or restarted{more} "
                 "(--tasks lists every task):")
            task_table(odd[:EXCEPTIONS_SHOWN])
        else:
            line(f"all {len(tasks)} tasks Running or Succeeded, none restarted (--tasks lists every task)")
    for text in error_lines(tasks):
        line(text)
    line(f"parameter servers: {ps_state(deployments)}")
    for text in reaper_lines(events):
        line(text)


@dataclass
class ClusterRow:
    namespace: str
    name: str
    workers: str  # succeeded/total
    ps: str  # ready/total
    chief: bool
    training: str


CHART_LABEL = "helm.sh/chart"  # tf-cluster's objects: `tf-cluster-<version>`


def cluster_rows(jobs: list, deployments: list, pods: SucceededTasks | None = None) -> list[ClusterRow]:
    """One row per TF cluster found among Jobs and Deployments (V1 objects) of the
    tf-cluster chart, labelled `tfhelm.io/cluster`: installed by tfhelm, plain Helm or GitOps
    alike (every way keeps the chart's labels). Other charts' objects with that label are
    no TF clusters. `pods`: the Succeeded pods (training.py's rule)."""
    groups: dict[tuple[str, str], ClusterObjects] = {}
    for kind, items in (("jobs", jobs), ("deployments", deployments)):
        for obj in items:
            labels = obj.metadata.labels or {}
            cluster = labels.get(CLUSTER_LABEL)
            if cluster and labels.get(CHART_LABEL, "").startswith("tf-cluster-"):
                key = (obj.metadata.namespace, cluster)
                getattr(groups.setdefault(key, ClusterObjects([], [], [], [])), kind).append(obj)
    rows = []
    for (ns, name), objs in sorted(groups.items()):
        jrows = job_rows(objs.jobs)
        current = current_jobs(jrows)  # during an upgrade the old generation's Jobs linger
        worker = current.get("worker")
        total, ready = ps_counts(objs.deployments)
        rows.append(ClusterRow(ns, name, f"{tasks_succeeded(worker, pods)}/{worker.total}" if worker else "-",
                               f"{ready}/{total}", "chief" in current, training_state(jrows, pods)))
    return rows


def list_clusters(kube, namespace: str | None) -> list[ClusterRow]:
    """`tfhelm list`: the rows from the Jobs and Deployments; while some training runs, its
    Succeeded pods too (metadata only), so the rule is the one status and the reaper apply."""
    jobs, deployments = kube.tf_workloads(namespace)
    rows = cluster_rows(jobs, deployments)
    if any(r.training == "Running" for r in rows):
        done = SucceededTasks()
        for pod in kube.tf_succeeded_pods(namespace):
            done.add(pod["metadata"])
        rows = cluster_rows(jobs, deployments, done)
    return rows
