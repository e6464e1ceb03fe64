"""The reaper: parameter servers go away once training is done, and nothing is lost.

TensorFlow parameter servers block in `server.join()` forever, and so do the workers of an
in-graph cluster. The reaper watches a cluster's Jobs and, once the completion condition
holds and the grace period passed, uninstalls the PS release `<name>-ps` (or, for a cluster
installed as one release or by a GitOps tool without Helm, deletes the PS Deployments and
Services directly) and suspends an in-graph worker Job so its servers stop. PVCs, finished
Jobs (their pods' logs) and checkpoints stay. On failure the policy decides: keep the PS
for debugging (default) or reap anyway.

Three layers, as everywhere in tfhelm:
  * `decide()`: pure; Jobs + configuration + clock -> one Decision.
  * `Reaper`: the loop. One watch on Jobs per cluster (or per namespace, for many clusters)
    in a background thread that resumes from the last resourceVersion, re-lists on
    410 Gone and backs off when the API server is away; the main thread keeps timers for
    grace periods and runs side effects in small pools: deletes first, Helm after, so one
    cluster's `helm uninstall` never delays another cluster's deletes.
  * `KubeReapClient`: the side effects (Helm, the Kubernetes API), injectable for tests.

Idempotent by construction: every action tolerates "already done" (a release already gone,
a 404, an Event that exists: Event names are deterministic), and the grace period can count
from the Job's end as the API server recorded it, so a reaper killed at any point and
restarted reaches the same end state, at the same time.
"""

from __future__ import annotations

import os
import queue
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterator, Protocol

from tfhelm import spec, training
from tfhelm.errors import Forbidden, ReleaseError, SpecError, TfhelmError, user_facing
from tfhelm.kube import CLUSTER_LABEL
from tfhelm.training import COMPLETIONS, JobRow

POLICIES = ("keep", "reap")
DEFAULT_GRACE = 30
# Event reasons, on the Job that decided (the chief's, or the workers').
REASON_REAPING = "TFClusterReaping"  # condition holds; grace period running
REASON_REAPED = "TFClusterReaped"
REASON_KEPT = "TFClusterKept"  # failed, --on-failure keep
EVENT_SOURCE = "tfhelm-reaper"
# Server-side watch timeout: the API server ends the watch and we resume it from the last
# resourceVersion; the client-side read timeout above it catches half-open connections.
WATCH_SECONDS = 240
# Server timestamps are whole seconds: a Job that finished at 12:00:00.9 says 12:00:00.
TIMESTAMP_RESOLUTION = 1.0

WAIT, GRACE, REAP, KEEP = "wait", "grace", "reap", "keep"


# --------------------------------------------------------------------------- pure core

@dataclass(frozen=True)
class ReapConfig:
    grace: float = DEFAULT_GRACE
    completion: str = "auto"
    on_failure: str = "keep"
    # Delete PS Deployments/Services directly, never through Helm (one-release clusters;
    # the in-cluster reaper of such a cluster has no permission on Helm's Secrets).
    delete_directly: bool = False

    def validate(self) -> "ReapConfig":
        if self.grace < 0:
            raise SpecError("--grace", f"must be 0 or more seconds, got {self.grace}")
        if self.completion not in COMPLETIONS:
            raise SpecError("--completion", f"'{self.completion}' is not a completion condition",
                            f"use one of {', '.join(COMPLETIONS)}")
        if self.on_failure not in POLICIES:
            raise SpecError("--on-failure", f"'{self.on_failure}' is not a policy", "use keep or reap")
        return self


def config_from_values(values: dict) -> ReapConfig:
    """The `reaper:` section of a cluster's chart values (defaults from the chart)."""
    from tfhelm.chart import deep_merge, default_values

    r = deep_merge(default_values(), values).get("reaper", {})
    return ReapConfig(grace=r.get("grace", DEFAULT_GRACE), completion=r.get("completion", "auto"),
                      on_failure=r.get("onFailure", "keep")).validate()


@dataclass(frozen=True)
class Decision:
    action: str  # WAIT, GRACE, REAP or KEEP
    cluster: str
    message: str  # a line a human can read: what holds and what happens
    job: JobRow | None = None  # the Job that decided; it gets the Event
    outcome: str | None = None  # "Complete" / "Failed" once decided
    due: float | None = None  # GRACE: epoch seconds when it turns into REAP
    stop_workers: str | None = None  # name of an in-graph worker Job to suspend

    @property
    def key(self) -> tuple:
        """One training run's decision: acted on once per reaper process."""
        return (self.cluster, self.job.uid if self.job else "", self.outcome)


def decide(cluster: str, jobs: list[JobRow], cfg: ReapConfig, now: float,
           observed: float | None = None) -> Decision:
    """What to do about one cluster now.

    `observed` is when this reaper first saw the outcome. The grace period runs from the
    earlier of that and the Job's end as the API server stamped it (whole seconds, so
    rounded up): both are at or after the real end, so the grace is never cut short, and a
    reaper restarted mid-grace continues it instead of starting it again.
    """
    job = training.decisive_job(jobs, cfg.completion)
    if job is None:
        have = ", ".join(sorted(j.name for j in jobs)) or "none"
        wanted = "chief" if cfg.completion == "chief" else "worker"
        return Decision(WAIT, cluster, f"no {wanted} Job (completion '{cfg.completion}'; Jobs: {have})")
    outcome = training.training_done(jobs, cfg.completion)
    what = (f"worker task 0 of Job {job.name}" if cfg.completion == "worker-0" and job.state == "Running"
            else f"Job {job.name}")
    if outcome is None:
        return Decision(WAIT, cluster, f"waiting: {job.role} {job.succeeded}/{job.total} succeeded"
                        + (f", {job.failed} failed" if job.failed else ""), job)
    if outcome == "Complete":
        why = f"training complete ({what} succeeded)"
    else:
        why = f"training failed ({what} failed{': ' + job.reason if job.reason else ''})"
        if cfg.on_failure == "keep":
            return Decision(KEEP, cluster, f"{why}; keeping the parameter servers for debugging "
                            f"(--on-failure keep); remove them with `tfhelm reap {cluster} "
                            f"--on-failure reap` or `tfhelm down {cluster}`", job, outcome)
    workers = training.current_jobs(jobs).get("worker")
    stop = (workers.name if workers and workers.runs_server and workers.state == "Running"
            and not workers.suspended else None)
    since = [t for t in (observed, _server_time(job, cfg.completion)) if t is not None]
    due = min(since, default=now) + cfg.grace
    if now < due:
        return Decision(GRACE, cluster, f"{why}; parameter servers go at "
                        f"{_clock(due)} (grace {cfg.grace:g}s)", job, outcome, due, stop)
    return Decision(REAP, cluster, f"{why}; grace {cfg.grace:g}s passed", job, outcome, due, stop)


def _server_time(job: JobRow, completion: str) -> float | None:
    # worker-0 finishing is not stamped on the Job; then only `observed` counts.
    if job.finished_at is None or (completion == "worker-0" and job.state == "Running"):
        return None
    return job.finished_at.timestamp() + TIMESTAMP_RESOLUTION


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S UTC")


def event_name(job: JobRow, reason: str) -> str:
    """Deterministic, so emitting an Event twice (a restarted reaper) is a no-op."""
    return f"{job.name}.{reason.lower()}.{job.uid[:8]}"


# --------------------------------------------------------------------------- side effects

class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): list again."""


class ReapClient(Protocol):
    """What the loop needs from the cluster. Every action is idempotent."""

    def list_jobs(self, namespace: str, selector: str) -> tuple[list, str]: ...

    def watch_jobs(self, namespace: str, selector: str, resource_version: str,
                   timeout: int) -> Iterator[tuple[str, object, str]]:
        """Yields (type, V1Job or None for bookmarks, resourceVersion); raises Gone."""

    def stop_watch(self) -> None: ...

    def uninstall(self, release: str, namespace: str) -> bool:
        """False when the release does not exist."""

    def delete_ps(self, namespace: str, cluster: str) -> list[str]:
        """Delete the cluster's PS Deployments and Services; what was deleted."""

    def suspend_job(self, namespace: str, name: str) -> bool: ...

    def emit(self, namespace: str, job: JobRow, reason: str, message: str, warning: bool) -> bool:
        """Create the Event; False when it already existed."""


@dataclass
class Result:
    cluster: str
    action: str  # REAP or KEEP
    outcome: str  # Complete / Failed
    message: str
    removed: list[str] = field(default_factory=list)


@dataclass
class _Running:
    """The reaper's memory of one training run (a decisive Job uid and its outcome)."""
    observed: float | None = None  # when the outcome arrived while we watched
    announced: bool = False  # the TFClusterReaping Event was emitted
    result: Result | None = None


class Reaper:
    """Watch one cluster (`cluster=NAME`) or every cluster in a namespace (`cluster=None`)
    and reap each once its training is done. `run()` returns the cluster's Result, or
    never returns with `forever=True` (in-cluster use) until `stop()`."""

    def __init__(self, client: ReapClient, namespace: str, cluster: str | None = None,
                 config: ReapConfig = ReapConfig(), *, forever: bool = False,
                 log_line: Callable[[str], None] = print,
                 on_status: Callable[[str, str], None] | None = None,
                 clock: Callable[[], float] = time.time, workers: int = 8,
                 backoff: tuple[float, float] = (0.2, 5.0)):
        self.client, self.namespace, self.cluster = client, namespace, cluster
        self.config = config.validate()
        self.forever = forever or cluster is None
        self.log_line, self.on_status, self.clock = log_line, on_status, clock
        self.backoff = backoff
        self.selector = f"{CLUSTER_LABEL}={cluster}" if cluster else CLUSTER_LABEL
        self._jobs: dict[str, JobRow] = {}  # by uid
        self._runs: dict[tuple, _Running] = {}
        self._busy: set[str] = set()  # clusters with an action in flight
        self._retry_at: dict[str, float] = {}  # clusters whose last action failed
        self._synced = False
        self._seen_target = False
        self._events: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        # API calls (deletes, Events) and Helm (a process per uninstall) in pools of their
        # own, so no cluster's deletes ever wait behind another cluster's Helm.
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="tfhelm-reap")
        self._helm_pool = ThreadPoolExecutor(max(1, workers // 2), thread_name_prefix="tfhelm-helm")
        self._last_status: dict[str, str] = {}

    # -- public

    def run(self) -> Result | None:
        watcher = threading.Thread(target=self._watch_loop, name="tfhelm-reaper-watch", daemon=True)
        watcher.start()
        try:
            return self._main_loop()
        finally:
            self._stop.set()
            self.client.stop_watch()
            self._pool.shutdown(wait=True)
            self._helm_pool.shutdown(wait=True)

    def stop(self) -> None:
        self._stop.set()
        self._events.put(("stop",))

    # -- the watch (background thread)

    def _watch_loop(self) -> None:
        rv, delay = None, self.backoff[0]
        while not self._stop.is_set():
            try:
                if rv is None:
                    jobs, rv = self.client.list_jobs(self.namespace, self.selector)
                    self._events.put(("sync", jobs))
                started, got = time.monotonic(), False
                for kind, job, new_rv in self.client.watch_jobs(self.namespace, self.selector, rv,
                                                                WATCH_SECONDS):
                    if self._stop.is_set():
                        return
                    rv, got, delay = new_rv or rv, True, self.backoff[0]
                    if job is not None and kind in ("ADDED", "MODIFIED", "DELETED"):
                        self._events.put(("job", kind, job))
                if not got and time.monotonic() - started < 1:
                    raise ConnectionError("watch ended at once")  # don't spin: back off
            except Gone:
                self._events.put(("log", f"{self.namespace}: watch expired (410 Gone); listing Jobs again"))
                rv = None
            except Exception as e:  # the API server went away, a connection dropped...
                if self._stop.is_set():
                    return
                if _forbidden(e):  # retrying cannot help: stop with the reason
                    self._events.put(("fatal", user_facing(e)))
                    return
                self._events.put(("watch-error", f"{type(e).__name__}: {e}".splitlines()[0][:200]))
                self._stop.wait(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self.backoff[1])
                rv = None  # list again: the state is fresh and the connection proven

    # -- the decisions (main thread)

    def _main_loop(self) -> Result | None:
        watch_errors = 0
        while True:
            timeout = self._next_timer()
            try:
                item = self._events.get(timeout=timeout)
            except queue.Empty:
                item = ("tick",)
            kind = item[0]
            if kind == "stop":
                return None
            if kind == "fatal":
                raise item[1]
            if kind == "sync":
                self._sync(item[1])
                if watch_errors:
                    self._say(f"{self.namespace}: watching again")
                    watch_errors = 0
            elif kind == "job":
                self._apply(item[1], item[2])
            elif kind == "log":
                self._say(item[1])
            elif kind == "watch-error":
                watch_errors += 1
                if watch_errors in (1, 10) or watch_errors % 100 == 0:  # a line, not a flood
                    self._say(f"{self.namespace}: API server unreachable, retrying ({item[1]})")
            elif kind == "done":
                self._finished(*item[1:])
            if not self._synced:
                continue
            if not self.forever:
                done = self._target_result()
                if done is not None:
                    return done
                self._check_target()
            self._evaluate()

    def _sync(self, jobs: list) -> None:
        rows = [training.job_row(j) for j in jobs]
        self._jobs = {r.uid: r for r in rows}
        for r in rows:
            self._note(r)
        if not self._synced:
            self._synced = True
            self._first_look()

    def _first_look(self) -> None:
        """Say at once what can never work, instead of waiting forever."""
        for cluster, jobs in sorted(self._clusters().items()):
            workers = training.current_jobs(jobs).get("worker")
            if workers and workers.runs_server and self.config.completion in ("all-workers", "worker-0"):
                self._say(f"{self.namespace}/{cluster}: warning: the workers only run TF servers "
                          f"(in-graph) and never finish; completion '{self.config.completion}' "
                          "will not hold (use auto or chief)")
            d = decide(cluster, jobs, self.config, self.clock())
            if d.job is None and not self.forever:
                raise SpecError("--completion", f"{self.namespace}/{cluster}: {d.message}",
                                "use auto, or add a chief (--chief)")

    def _check_target(self) -> None:
        if self._busy:
            return
        if not self._seen_target:
            raise SpecError("NAME", f"no TF cluster '{self.cluster}' in namespace {self.namespace} "
                            f"(no Jobs labelled {self.selector})", "see `helm list -n NAMESPACE`")
        if not any(j.cluster == self.cluster for j in self._jobs.values()):
            raise TfhelmError(f"the Jobs of {self.namespace}/{self.cluster} were deleted "
                              "before training finished")

    def _apply(self, kind: str, job) -> None:
        row = training.job_row(job)
        if kind == "DELETED":
            self._jobs.pop(row.uid, None)
        else:
            self._jobs[row.uid] = row
            self._note(row)

    def _note(self, row: JobRow) -> None:
        if row.cluster == self.cluster:
            self._seen_target = True

    def _target_result(self) -> Result | None:
        for (cluster, _, _), run in self._runs.items():
            if cluster == self.cluster and run.result is not None:
                return run.result
        return None

    def _clusters(self) -> dict[str, list[JobRow]]:
        out: dict[str, list[JobRow]] = {}
        for j in self._jobs.values():
            if j.cluster and (self.cluster is None or j.cluster == self.cluster):
                out.setdefault(j.cluster, []).append(j)
        return out

    def _evaluate(self) -> None:
        now = self.clock()
        for cluster, jobs in sorted(self._clusters().items()):
            if cluster in self._busy or self._retry_at.get(cluster, 0) > now:
                continue
            d = self._decide(cluster, jobs, now)
            if d.action == WAIT:
                self._status(cluster, d.message)
                continue
            run = self._runs.setdefault(d.key, _Running())
            if run.result is not None:
                continue  # this training run was dealt with
            if d.action == GRACE and run.announced:
                self._status(cluster, d.message)
                continue
            self._busy.add(cluster)
            self._retry_at.pop(cluster, None)
            self._say(f"{self.namespace}/{cluster}: {d.message}")
            self._pool.submit(self._act, d)

    def _decide(self, cluster: str, jobs: list[JobRow], now: float) -> Decision:
        d = decide(cluster, jobs, self.config, now)
        if d.job is None or d.outcome is None:
            return d
        run = self._runs.setdefault(d.key, _Running())
        if run.observed is None:
            run.observed = now
        return decide(cluster, jobs, self.config, now, run.observed)

    def _next_timer(self) -> float | None:
        if not self._synced:
            return None
        now = self.clock()
        times = [t for c, t in self._retry_at.items() if c not in self._busy]
        for cluster, jobs in self._clusters().items():
            if cluster not in self._busy:
                d = self._decide(cluster, jobs, now)
                if d.action == GRACE:
                    times.append(d.due)
        return max(0.0, min(times) - now) + 0.01 if times else None

    # -- actions (pool threads); results come back as ("done", ...) items

    def _act(self, d: Decision) -> None:
        try:
            if d.action == GRACE:
                self.client.emit(self.namespace, d.job, REASON_REAPING, d.message, False)
                self._events.put(("done", d, None, None))
            elif d.action == KEEP:
                self.client.emit(self.namespace, d.job, REASON_KEPT, d.message, True)
                self._events.put(("done", d, Result(d.cluster, KEEP, d.outcome, d.message), None))
            else:
                removed = self._stop_ps(d)
                try:
                    self._helm_pool.submit(self._finish_reap, d, removed)
                except RuntimeError:  # the pool is shutting down: finish here
                    self._finish_reap(d, removed)
        except Exception as e:  # noqa: BLE001 - reported and retried by the main loop
            self._events.put(("done", d, None, e))

    def _stop_ps(self, d: Decision) -> list[str]:
        """The PS objects, directly: a few API calls, so the PS stop at once however long
        Helm takes. All there is to do for a cluster installed as one release or by a GitOps
        tool without Helm (the release keeps listing them; see docs/reaper.md)."""
        ns, removed = self.namespace, []
        gone = self.client.delete_ps(ns, d.cluster)
        if gone:
            removed.append(f"deleted {', '.join(gone)}")
        if d.stop_workers and self.client.suspend_job(ns, d.stop_workers):
            removed.append(f"suspended Job {d.stop_workers} (in-graph worker servers stop; "
                           "the Job stays)")
        return removed

    def _finish_reap(self, d: Decision, removed: list[str]) -> None:
        """The PS release's record (its Secrets and ConfigMap), then the Event."""
        try:
            ns, release = self.namespace, spec.ps_release(d.cluster)
            if not self.config.delete_directly and self.client.uninstall(release, ns):
                removed.insert(len([r for r in removed if r.startswith("deleted ")]),
                               f"uninstalled release {ns}/{release}")
            did = "; ".join(removed) or "parameter servers already gone"
            message = f"{d.message}: {did}"
            self.client.emit(ns, d.job, REASON_REAPED, message, d.outcome != "Complete")
            self._events.put(("done", d, Result(d.cluster, REAP, d.outcome, message, removed), None))
        except Exception as e:  # noqa: BLE001 - reported and retried by the main loop
            self._events.put(("done", d, None, e))

    def _finished(self, d: Decision, result: Result | None, error: Exception | None) -> None:
        self._busy.discard(d.cluster)
        run = self._runs.setdefault(d.key, _Running())
        if error is not None and _forbidden(error):
            raise user_facing(error) or error
        if error is not None:
            wait = self.backoff[1]
            self._retry_at[d.cluster] = self.clock() + wait
            self._say(f"{self.namespace}/{d.cluster}: {d.action} failed, retrying in {wait:g}s: "
                      f"{type(error).__name__}: {error}".splitlines()[0])
            return
        self._retry_at.pop(d.cluster, None)
        if d.action == GRACE:
            run.announced = True
            return
        run.result = result
        verb = "reaped" if result.action == REAP else "kept"
        what = (("; ".join(result.removed) or "nothing left to remove") if result.action == REAP
                else "parameter servers left running")
        self._say(f"{self.namespace}/{d.cluster}: {verb}: {what}")

    # -- output

    def _say(self, line: str) -> None:
        self.log_line(line)

    def _status(self, cluster: str, text: str) -> None:
        if self._last_status.get(cluster) == text:
            return
        if self.on_status:
            self.on_status(cluster, text)
        elif cluster not in self._last_status:  # no spinner: one line, not one per task
            self._say(f"{self.namespace}/{cluster}: {text}")
        self._last_status[cluster] = text


# --------------------------------------------------------------------------- the real client

class KubeReapClient:
    """Helm (pyhelm3) and the Kubernetes API. `helm` is made on first use: a reaper that
    deletes directly needs no helm binary."""

    def __init__(self, kube, helm=None):
        self.kube, self._helm, self._watch = kube, helm, None
        self.instance = os.environ.get("HOSTNAME") or socket.gethostname()

    @property
    def helm(self):
        if self._helm is None:
            from tfhelm.helm import Helm

            self._helm = Helm()
        return self._helm

    def list_jobs(self, namespace, selector):
        res = self.kube.batch.list_namespaced_job(namespace, label_selector=selector,
                                                  _request_timeout=30)
        return res.items, res.metadata.resource_version

    def watch_jobs(self, namespace, selector, resource_version, timeout):
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        w = self._watch = watch.Watch()
        try:
            for ev in w.stream(self.kube.batch.list_namespaced_job, namespace,
                               label_selector=selector, resource_version=resource_version,
                               allow_watch_bookmarks=True, timeout_seconds=timeout,
                               _request_timeout=(10, timeout + 30)):
                obj = None if ev["type"] == "BOOKMARK" else ev["object"]
                yield ev["type"], obj, w.resource_version
        except ApiException as e:
            if e.status == 410:
                raise Gone(str(e.reason)) from e
            raise

    def stop_watch(self):
        if self._watch is not None:
            self._watch.stop()

    def uninstall(self, release, namespace):
        # No --wait: Kubernetes' garbage collector removes the pods; waiting would need
        # watch permissions on every kind in the release.
        return self.helm.uninstall(release, namespace, wait=False)

    def delete_ps(self, namespace, cluster):
        sel = f"{CLUSTER_LABEL}={cluster},tfhelm.io/role=ps"
        deleted = []
        for kind, lister, deleter in (
                ("Deployment", self.kube.apps.list_namespaced_deployment,
                 self.kube.apps.delete_namespaced_deployment),
                ("Service", self.kube.core.list_namespaced_service,
                 self.kube.core.delete_namespaced_service)):
            for obj in lister(namespace, label_selector=sel, _request_timeout=30).items:
                if _ok_if_missing(deleter, obj.metadata.name, namespace, propagation_policy="Background"):
                    deleted.append(f"{kind} {obj.metadata.name}")
        return deleted

    def suspend_job(self, namespace, name):
        return _ok_if_missing(self.kube.batch.patch_namespaced_job, name, namespace,
                              {"spec": {"suspend": True}})

    def emit(self, namespace, job, reason, message, warning):
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        now = datetime.now(timezone.utc)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=event_name(job, reason), namespace=namespace,
                                         labels={CLUSTER_LABEL: job.cluster}),
            involved_object=client.V1ObjectReference(api_version="batch/v1", kind="Job",
                                                     name=job.name, namespace=namespace, uid=job.uid),
            reason=reason, message=message[:1024], type="Warning" if warning else "Normal",
            first_timestamp=now, last_timestamp=now, count=1,
            source=client.V1EventSource(component=EVENT_SOURCE),
            reporting_component="tfhelm.io/reaper", reporting_instance=self.instance[:128])
        try:
            self.kube.core.create_namespaced_event(namespace, body, _request_timeout=30)
            return True
        except ApiException as e:
            if e.status == 409:
                return False
            raise


def _forbidden(err: Exception) -> bool:
    """401/403 from the API server or from Helm: RBAC will not change by retrying."""
    known = user_facing(err)
    return isinstance(known, Forbidden) or (
        isinstance(known, ReleaseError) and any(w in str(known).lower() for w in ("forbidden", "unauthorized")))


def _ok_if_missing(fn, *args, **kwargs) -> bool:
    from kubernetes.client.rest import ApiException

    try:
        fn(*args, _request_timeout=30, **kwargs)
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise


def cluster_events(kube, namespace: str, jobs: list) -> list:
    """The Events on a cluster's Jobs (for `tfhelm status`): one small list per Job."""
    events = []
    for job in jobs:
        sel = f"involvedObject.kind=Job,involvedObject.name={job.metadata.name}"
        events += kube.core.list_namespaced_event(namespace, field_selector=sel).items
    return events
