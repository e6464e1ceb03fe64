"""The reaper's loop: two watch threads (tfhelm.cluster.feed) that turn the API server's
events on Jobs and on Succeeded pods into typed events on a queue, and the main loop that
keeps the Jobs, the pods' counts, the grace timers and each training run's memory, and
hands actions to small pools (deletes first, Helm after). A pod event is decided at once:
the Job controller counts pods about a second later. Standard library only: `tfhelm reap`
runs it with its client (tfhelm.reaper.client), the in-cluster reaper with its own
(tfhelm.reaper.incluster)."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from tfhelm.cluster import feed, training
from tfhelm.cluster.feed import WATCH_SECONDS, Changed, Fatal, Listed, Note, WatchFailed
from tfhelm.cluster.training import JobRow
from tfhelm.contract import CLUSTER_LABEL, ROLE_LABEL
from tfhelm.errors import SpecError, TfhelmError
from tfhelm.reaper.messages import ActionDone, Event, RuleDone, Running, Stop
from tfhelm.reaper.protocol import ReapClient, Rule, View
from tfhelm.reaper.rules import (GRACE, KEEP, REAP, REASON_KEPT, REASON_REAPED, REASON_REAPING, WAIT,
                                 Decision, ReapConfig, Result, decide, never_finishes)

__all__ = ["WATCH_SECONDS", "Reaper"]
# Without read access to pods (a kubeconfig or Role without it), the Jobs alone
# decide: about a second later, when the Job controller has counted the pods.
NO_PODS = "no read access to pods: training done is seen from the Jobs alone"
RULE_TICK = 5.0  # seconds: how often further rules decide when nothing changes


class Reaper:
    """Watch one cluster (`cluster=NAME`) or every cluster in a namespace (`cluster=None`)
    and reap each once its training is done. `run()` returns the cluster's Result, or
    never returns with `forever=True` (in-cluster use) until `stop()`. `rules`: further
    decisions made beside the reaping (tfhelm.reaper.protocol.Rule); `reap=False`: only those
    (a queued cluster with nothing to reap still needs its gates opened: tfhelm.reaper.gates)."""

    def __init__(self, client: ReapClient, namespace: str, cluster: str | None, config: ReapConfig, *,
                 forever: bool = False, rules: list[Rule] | tuple = (),
                 log_line: Callable[[str], None] = print,
                 log_record: Callable[[dict], None] | None = None,
                 metrics=None,
                 on_status: Callable[[str, str], None] | None = None,
                 clock: Callable[[], float] = time.time, workers: int = 8,
                 backoff: tuple[float, float] = (0.2, 5.0), reap: bool = True):
        self.client, self.namespace, self.cluster = client, namespace, cluster
        self.reap = reap
        self._queued_since: dict[str, float] = {}  # Kueue-queued clusters waiting: since when
        self.config = config.validate()
        self.forever = forever or cluster is None
        self.log_line, self.on_status, self.clock = log_line, on_status, clock
        self.log_record = log_record  # structured lines (--log-format json), instead of log_line
        self.metrics = metrics  # a tfhelm.reaper.metrics.ReaperMetrics, or None
        self.backoff = backoff
        self.selector = f"{CLUSTER_LABEL}={cluster}" if cluster else CLUSTER_LABEL
        roles = {"chief": "chief", "auto": "chief,worker"}.get(self.config.completion, "worker")
        self.pod_selector = f"{self.selector},{ROLE_LABEL} in ({roles})"  # the decisive role's
        self._jobs: dict[str, JobRow] = {}  # by uid
        self._pods = training.SucceededTasks()
        self._runs: dict[tuple, Running] = {}
        self._busy: set[str] = set()  # clusters with an action in flight
        self._retry_at: dict[str, float] = {}  # clusters whose last action failed
        self._synced = False
        self._seen_target = False
        self._events: queue.Queue[Event] = queue.Queue()
        self._stop = threading.Event()
        # API calls (deletes, Events) and Helm (a process per uninstall) in pools of their
        # own, so no cluster's deletes ever wait behind another cluster's Helm.
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="tfhelm-reap")
        self._helm_pool = ThreadPoolExecutor(max(1, workers // 2), thread_name_prefix="tfhelm-helm")
        self._last_status: dict[str, str] = {}
        self._watch_errors = 0
        self.rules = list(rules)
        self._objects = {name: {} for r in self.rules for name in r.sources}  # the rules' sources
        self._rule_actions: dict[tuple, float | None] = {}  # (rule, action) -> retry time; None: running
        self._rule_done: set[tuple] = set()  # done, while the rule still decides them

    # -- public

    def run(self) -> Result | None:
        c, ns, args = self.client, self.namespace, (self._events, self._stop, self.backoff)
        jobs, pods = self.selector, self.pod_selector
        feeds = [feed.Feed("jobs", "Jobs", lambda: c.list_jobs(ns, jobs),
                           lambda rv, t: c.watch_jobs(ns, jobs, rv, t), *args, refused=c.refused).start(),
                 feed.Feed("pods", "pods", lambda: c.list_pods(ns, pods),
                           lambda rv, t: c.watch_pods(ns, pods, rv, t), *args, optional=NO_PODS,
                           refused=c.refused).start()]
        for name, source in ((n, s) for r in self.rules for n, s in r.sources.items()):
            feeds.append(feed.Feed(name, name, lambda s=source: s.list(c, ns),
                                   lambda rv, t, s=source: s.watch(c, ns, rv, t), *args, refused=c.refused).start())
        try:
            return self._main_loop()
        finally:
            feed.end(feeds, self.client.stop_watch)
            self._pool.shutdown(wait=True)
            self._helm_pool.shutdown(wait=True)

    def stop(self) -> None:
        self._stop.set()
        self._events.put(Stop())

    # -- the decisions (main thread)

    def _main_loop(self) -> Result | None:
        while True:
            try:
                event = self._events.get(timeout=self._next_timer())
            except queue.Empty:
                event = None  # a timer is due
            if isinstance(event, Stop):
                return None
            self._handle(event)
            if not self._synced:
                continue
            if not self.forever:
                done = self._target_result()
                if done is not None:
                    return done
                self._check_target()
            self._evaluate()

    def _handle(self, event: Event | None) -> None:
        match event:
            case Fatal(error):
                raise error
            case Listed(name, items) if name in self._objects:
                self._objects[name] = {o["metadata"]["uid"]: o for o in items}
            case Changed(name, kind, obj) if name in self._objects:
                if kind == "DELETED":
                    self._objects[name].pop(obj["metadata"]["uid"], None)
                else:
                    self._objects[name][obj["metadata"]["uid"]] = obj
            case Listed("pods", pods):
                self._pods = training.SucceededTasks()
                for pod in pods:
                    self._pods.add(pod["metadata"])
                self._watching_again()
            case Listed(_, jobs):
                self._sync(jobs)
                self._watching_again()
            case Changed("pods", _, pod):  # even DELETED: it did succeed
                self._pods.add(pod["metadata"])
            case Changed(_, kind, job):
                self._apply(kind, job)
            case Note(line):
                self._say(line)
            case WatchFailed(reason):
                self._watch_errors += 1
                if self.metrics:
                    self.metrics.error("watch")
                n = self._watch_errors
                if n in (1, 10) or n % 100 == 0:  # a line, not a flood
                    self._say(f"API server unreachable, retrying ({reason})", level="warning")
            case ActionDone(decision, result, error):
                self._finished(decision, result, error)
            case RuleDone(rule, action, line, error):
                self._rule_finished(rule, action, line, error)

    def _watching_again(self) -> None:
        if self._watch_errors:
            self._say("watching again")
            self._watch_errors = 0

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
        for cluster, jobs in sorted(self._clusters().items()) if self.reap else ():
            if never_finishes(jobs, self.config):
                self._say("warning: the workers only run TF servers "
                          f"(in-graph) and never finish; completion '{self.config.completion}' "
                          "will not hold (use auto or chief)", cluster, "warning")
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
            self._pods.forget(row.uid)
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
        clusters = self._clusters()
        if self.metrics:
            self.metrics.watching(len(clusters))
        self._watch_queue(clusters, now)
        for cluster, jobs in sorted(clusters.items()) if self.reap else ():
            if cluster in self._busy or self._retry_at.get(cluster, 0) > now:
                continue
            d = self._decide(cluster, jobs, now)
            if d.action == WAIT:
                self._status(cluster, d.message)
                continue
            run = self._runs.setdefault(d.key, Running())
            if run.result is not None:
                continue  # this training run was dealt with
            if d.action == GRACE and run.announced:
                self._status(cluster, d.message)
                continue
            self._busy.add(cluster)
            self._retry_at.pop(cluster, None)
            self._say(d.message, cluster)
            if d.action == REAP and not run.announced:  # no grace announced it: say it now,
                self._pool.submit(self._announce, d)     # beside the deletes, not after them
            self._pool.submit(self._act, d)
        if self.rules:
            self._evaluate_rules(View(self.namespace, clusters, self._pods, self._objects), now)

    def _evaluate_rules(self, view: View, now: float) -> None:
        """Each further rule's due actions, started unless running, waiting for a retry, or
        done while the rule still decides them."""
        decided = {(r, a) for r in self.rules for a in r.decide(view, now)}
        self._rule_done &= decided
        for key in decided - self._rule_done:
            retry = self._rule_actions.get(key, 0.0)
            if retry is not None and retry <= now:
                self._rule_actions[key] = None
                self._pool.submit(self._rule_act, *key)

    def _decide(self, cluster: str, jobs: list[JobRow], now: float) -> Decision:
        d = decide(cluster, jobs, self.config, now, pods=self._pods)
        if d.job is None or d.outcome is None:
            return d
        run = self._runs.setdefault(d.key, Running())
        if run.observed is None:
            run.observed = now
        return decide(cluster, jobs, self.config, now, run.observed, self._pods)

    def _next_timer(self) -> float | None:
        if not self._synced:
            return None
        now = self.clock()
        times = [t for c, t in self._retry_at.items() if c not in self._busy]
        times += [t for t in self._rule_actions.values() if t is not None]
        if self.rules:  # a rule may decide by the clock alone (a node gone for long enough)
            times.append(now + RULE_TICK)
        for cluster, jobs in self._clusters().items() if self.reap else ():
            if cluster not in self._busy:
                d = self._decide(cluster, jobs, now)
                if d.action == GRACE:
                    times.append(d.due)
        return max(0.0, min(times) - now) + 0.01 if times else None

    def _watch_queue(self, clusters: dict[str, list[JobRow]], now: float) -> None:
        """Which Kueue-queued clusters wait for admission, and since when (a line at each change,
        the metrics' gauge); a wait that ends in an admission is a sample of their histogram."""
        waiting = {}
        for cluster, jobs in clusters.items():
            workers = training.queued(jobs)
            if workers and not training.training_done(jobs, self.config.completion, self._pods):
                waiting[cluster] = workers.suspended_since.timestamp() if workers.suspended_since else now
        for cluster in self._queued_since.keys() - waiting.keys():
            since = self._queued_since.pop(cluster)
            if cluster in clusters and not training.queued(clusters[cluster]):
                self._say(f"admitted by Kueue after {max(0.0, now - since):.0f}s in the queue", cluster)
                if self.metrics:
                    self.metrics.admitted(now - since)
        for cluster, since in waiting.items():
            if cluster not in self._queued_since:
                self._say("queued: waiting for Kueue to admit the workers", cluster)
            self._queued_since[cluster] = since
        if self.metrics:
            self.metrics.queued(dict(self._queued_since))

    # -- actions (pool threads); each ends in one ActionDone on the queue

    def _act(self, d: Decision) -> None:
        try:
            if d.action == GRACE:
                self.client.emit(self.namespace, d.job, REASON_REAPING, d.message, False)
                self._events.put(ActionDone(d))
            elif d.action == KEEP:
                self.client.emit(self.namespace, d.job, REASON_KEPT, d.message, True)
                self._events.put(ActionDone(d, Result(d.cluster, KEEP, d.outcome, d.message)))
            else:
                removed = self._stop_ps(d)
                try:
                    self._helm_pool.submit(self._finish_reap, d, removed)
                except RuntimeError:  # the pool is shutting down: finish here
                    self._finish_reap(d, removed)
        except Exception as e:  # noqa: BLE001 - reported and retried by the main loop
            self._events.put(ActionDone(d, error=e))

    def _rule_act(self, rule: Rule, action) -> None:
        try:
            self._events.put(RuleDone(rule, action, rule.act(self.client, action)))
        except Exception as e:  # noqa: BLE001 - reported and retried by the main loop
            self._events.put(RuleDone(rule, action, error=e))

    def _rule_finished(self, rule: Rule, action, line: str | None, error: Exception | None) -> None:
        key = (rule, action)
        refusal = None if error is None else self.client.refused(error)
        if refusal is not None:
            raise refusal
        if error is None:
            self._rule_actions.pop(key, None)
            self._rule_done.add(key)
            if line:
                self._say(f"{rule.name}: {line}")
            return
        self._rule_actions[key] = self.clock() + self.backoff[1]
        if self.metrics:
            self.metrics.error("action")
        self._say(f"{rule.name}: {action} failed, retrying in {self.backoff[1]:g}s: "
                  f"{type(error).__name__}: {error}".splitlines()[0], level="error")

    def _announce(self, d: Decision) -> None:
        """The TFClusterReaping Event of a reap with no grace left: training is done, seen
        the moment the decisive pod succeeded; the reap's own Event follows its deletes."""
        try:
            self.client.emit(self.namespace, d.job, REASON_REAPING, d.message, False)
        except Exception as e:  # noqa: BLE001 - the reap goes on; its own Event reports errors
            self._events.put(Note(f"{d.cluster}: cannot record the {REASON_REAPING} "
                                  f"Event: {type(e).__name__}: {e}".splitlines()[0]))

    def _stop_ps(self, d: Decision) -> list[str]:
        """The PS objects, directly: a few API calls, so the PS stop at once however long
        Helm takes. All there is to do for a cluster installed as one release or by a GitOps
        tool without Helm (the release keeps listing them; see docs/reaper.md)."""
        ns, removed = self.namespace, []
        gone = self.client.delete_ps(ns, d.cluster)
        if gone:
            removed.append(f"deleted {', '.join(gone)}")
        if d.stop_workers and d.stop_by_delete:
            if self.client.delete_job(ns, d.stop_workers):
                removed.append(f"deleted Job {d.stop_workers} (in-graph worker servers stop and Kueue "
                               "frees their quota: a queued Job cannot stay suspended)")
        elif d.stop_workers and self.client.suspend_job(ns, d.stop_workers):
            removed.append(f"suspended Job {d.stop_workers} (in-graph worker servers stop; "
                           "the Job stays)")
        return removed

    def _finish_reap(self, d: Decision, removed: list[str]) -> None:
        """The PS release's record (its Secrets and ConfigMap), then the Event."""
        try:
            ns = self.namespace
            release = None if self.config.delete_directly else self.client.uninstall_ps(ns, d.cluster)
            if release:
                removed.insert(len([r for r in removed if r.startswith("deleted ")]),
                               f"uninstalled release {ns}/{release}")
            did = "; ".join(removed) or "parameter servers already gone"
            message = f"{d.message}: {did}"
            self.client.emit(ns, d.job, REASON_REAPED, message, d.outcome != "Complete")
            self._events.put(ActionDone(d, Result(d.cluster, REAP, d.outcome, message, removed)))
        except Exception as e:  # noqa: BLE001 - reported and retried by the main loop
            self._events.put(ActionDone(d, error=e))

    def _finished(self, d: Decision, result: Result | None, error: Exception | None) -> None:
        self._busy.discard(d.cluster)
        run = self._runs.setdefault(d.key, Running())
        refusal = None if error is None else self.client.refused(error)
        if refusal is not None:
            raise refusal
        if error is not None:
            if self.metrics:
                self.metrics.error("action")
            wait = self.backoff[1]
            self._retry_at[d.cluster] = self.clock() + wait
            self._say(f"{d.action} failed, retrying in {wait:g}s: "
                      f"{type(error).__name__}: {error}".splitlines()[0], d.cluster, "error")
            return
        self._retry_at.pop(d.cluster, None)
        if d.action == GRACE:
            run.announced = True
            return
        run.result = result
        if self.metrics:
            self.metrics.done(d.cluster, result.action, result.outcome,
                              self.clock() - d.due if result.action == REAP and d.due else None)
        verb = "reaped" if result.action == REAP else "kept"
        what = (("; ".join(result.removed) or "nothing left to remove") if result.action == REAP
                else "parameter servers left running")
        self._say(f"{verb}: {what}", d.cluster)

    # -- output

    def _say(self, text: str, cluster: str | None = None, level: str = "info") -> None:
        """A line about the namespace or one of its clusters: `ns/cluster: text` for
        log_line, or a record (level, namespace, cluster, msg) for log_record."""
        if self.log_record is not None:
            msg = text.removeprefix(f"{level}: ")
            self.log_record({"level": level, "namespace": self.namespace, "cluster": cluster, "msg": msg})
        else:
            self.log_line(f"{self.namespace}/{cluster}: {text}" if cluster else f"{self.namespace}: {text}")

    def _status(self, cluster: str, text: str) -> None:
        if self._last_status.get(cluster) == text:
            return
        if self.on_status:
            self.on_status(cluster, text)
        elif cluster not in self._last_status:  # no spinner: one line, not one per task
            self._say(text, cluster)
        self._last_status[cluster] = text
