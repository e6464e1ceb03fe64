"""A task's Prometheus metrics, served by the launcher (PID 1, never the script's child) on
the port the chart's `metrics.enabled` sets, in every mode: the task's up, start time and
restarts, and on the cluster's first task (chief 0, else worker 0) the training's progress,
read from the event files the script writes under the log directory (tfhelm.pod.events)."""

from __future__ import annotations

import os
import threading
import time

from tfhelm import contract
from tfhelm.pod.events import Progress
from tfhelm.pod.logs import log
from tfhelm.pod.prometheus import sample_line, serve_metrics

METRICS_PORT, METRICS_PROGRESS, CLUSTER, LOG_DIR, STATE_DIR = (
    contract.env(k) for k in ("metricsPort", "metricsProgress", "cluster", "logDir", "stateDir"))
INDEX_FAILURES = [contract.env(k) for k in ("indexFailures", "indexIgnoredFailures")]


class TaskMetrics:
    """This task's metrics in Prometheus' text format (`render()`)."""

    HELP = {
        "tfhelm_task_up": ("gauge", "1 while the task's launcher runs."),
        "tfhelm_task_start_time_seconds": ("gauge", "When this task's launcher started (Unix time)."),
        "tfhelm_task_restarts_total": ("counter", "Earlier attempts of this task: failed pods of its "
                                       "Job index, and container restarts in this pod."),
        "tfhelm_task_decides_completion": ("gauge", "1 on the tasks whose Job decides when training "
                                           "is done (the chief if there is one, else the workers)."),
        "tfhelm_train_step": ("gauge", "Step of the newest summary in the run's event files, per directory."),
        "tfhelm_train_scalar": ("gauge", "Newest value of each scalar summary, per directory and tag."),
        "tfhelm_train_last_event_time_seconds": ("gauge", "Wall time of the newest summary, per directory."),
    }

    def __init__(self, config: dict, environ=None, clock=time.time):
        env = os.environ if environ is None else environ
        task, cluster = config["task"], config["cluster"]
        self.labels = {"cluster": env.get(CLUSTER, ""), "role": task["type"],
                       "index": str(task["index"])}
        self.start = clock()
        self.restarts = self._restarts(env)
        first = ("chief", 0) if cluster.get("chief") else ("worker", 0)
        self.decides = task["type"] == first[0]
        log_dir = env.get(LOG_DIR, "")
        reports = env.get(METRICS_PROGRESS, "1") != "0" and (task["type"], task["index"]) == first
        self.progress = Progress(log_dir) if reports and log_dir else None
        self.lock = threading.Lock()

    def _restarts(self, env) -> int:
        """Failed pods of this Job index (the Job controller's annotations, through the
        downward API), plus starts of this container before this one: a count kept in the
        pod's /tmp (an emptyDir survives container restarts)."""
        count = sum(int(env.get(k, "") or 0) for k in INDEX_FAILURES
                    if (env.get(k, "") or "0").isdigit())
        path = os.path.join(env.get(STATE_DIR, "/tmp"), ".tfhelm-starts")
        try:
            with open(path, "a+", encoding="utf-8") as f:
                f.seek(0)
                before = len(f.read())
                f.write("x")
            count += before
        except OSError:
            pass
        return count

    def render(self) -> str:
        samples = {"tfhelm_task_up": [(self.labels, 1)],
                   "tfhelm_task_start_time_seconds": [(self.labels, self.start)],
                   "tfhelm_task_restarts_total": [(self.labels, self.restarts)]}
        if self.decides:
            samples["tfhelm_task_decides_completion"] = [(self.labels, 1)]
        if self.progress is not None:
            with self.lock:
                self.progress.update()
                runs = sorted(self.progress.runs.items())
            for run, r in runs:
                at = {**self.labels, "dir": run}
                samples.setdefault("tfhelm_train_step", []).append((at, r["step"]))
                samples.setdefault("tfhelm_train_last_event_time_seconds", []).append((at, r["wall"]))
                for tag, (_, value) in sorted(r["scalars"].items()):
                    samples.setdefault("tfhelm_train_scalar", []).append(({**at, "tag": tag}, value))
        out = []
        for name, rows in samples.items():
            kind, text = self.HELP[name]
            out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            out += [sample_line(name, labels, value) for labels, value in rows]
        return "\n".join(out) + "\n"


def start_metrics(config: dict, environ=None):
    """Serve this task's `TaskMetrics` on the port the environment names (METRICS_PORT);
    None when it is unset, or when anything goes wrong (said in a warning: metrics never stop
    a training)."""
    env = os.environ if environ is None else environ
    port = env.get(METRICS_PORT, "")
    if not port.isdigit():
        return None
    try:
        return serve_metrics(int(port), TaskMetrics(config, env).render)
    except Exception as e:  # noqa: BLE001 - a bug here must not end the task
        log(f"warning: metrics not served: {type(e).__name__}: {e}")
        return None
