"""The reaper's own Prometheus metrics: clusters watched, reaps (and keeps), how long after the
grace period each reap finished, errors; for Kueue-queued clusters (`--gates`), since when
each one waits for admission and how long the waits were (the TFTrainingQueuedTooLong alert).
Served by `tfhelm reap --metrics-port N` (the in-cluster reaper: `reaper.metrics`) with the
pods' server (tfhelm.pod.httpd); the `namespace` and `pod` labels come from the scrape."""

from __future__ import annotations

import threading
import time
from typing import Callable

from tfhelm.pod.prometheus import sample_line, serve_metrics

# Seconds from the end of the grace period to the reap's end (the PS deleted, the Event written).
LATENCY_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
# Seconds a queued cluster waited for Kueue's admission (from its submission or its requeue).
WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)


class ReaperMetrics:
    def __init__(self, clock: Callable[[], float] = time.time):
        self._lock = threading.Lock()
        self.start = clock()
        self.clusters = 0
        self.reaps: dict[tuple[str, str, str], int] = {}  # (cluster, action, outcome) -> count
        self.errors: dict[str, int] = {"watch": 0, "action": 0}
        self.buckets = [0] * len(LATENCY_BUCKETS)
        self.latency_sum, self.latency_count = 0.0, 0
        self.waiting: dict[str, float] = {}  # queued cluster -> since (Unix time)
        self.wait_buckets = [0] * len(WAIT_BUCKETS)
        self.wait_sum, self.wait_count = 0.0, 0

    def watching(self, clusters: int) -> None:
        with self._lock:
            self.clusters = clusters

    def error(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def done(self, cluster: str, action: str, outcome: str, latency: float | None = None) -> None:
        """A training run dealt with: `reap` (with its latency after the grace) or `keep`."""
        with self._lock:
            key = (cluster, action, outcome)
            self.reaps[key] = self.reaps.get(key, 0) + 1
            if latency is not None:
                latency = max(0.0, latency)
                self.latency_sum += latency
                self.latency_count += 1
                for i, le in enumerate(LATENCY_BUCKETS):
                    if latency <= le:
                        self.buckets[i] += 1

    def queued(self, since: dict[str, float]) -> None:
        """The clusters that wait for Kueue's admission now, each with since when."""
        with self._lock:
            self.waiting = since

    def admitted(self, waited: float) -> None:
        """A cluster's wait ended in its admission."""
        with self._lock:
            waited = max(0.0, waited)
            self.wait_sum += waited
            self.wait_count += 1
            for i, le in enumerate(WAIT_BUCKETS):
                if waited <= le:
                    self.wait_buckets[i] += 1

    def render(self) -> str:
        with self._lock:
            out = ["# HELP tfhelm_reaper_start_time_seconds When the reaper started (Unix time).",
                   "# TYPE tfhelm_reaper_start_time_seconds gauge",
                   sample_line("tfhelm_reaper_start_time_seconds", {}, self.start),
                   "# HELP tfhelm_reaper_clusters_watched TF clusters (with Jobs) the reaper watches.",
                   "# TYPE tfhelm_reaper_clusters_watched gauge",
                   sample_line("tfhelm_reaper_clusters_watched", {}, self.clusters),
                   "# HELP tfhelm_reaper_reaps_total Training runs dealt with: parameter servers "
                   "removed (action reap) or kept for debugging (action keep).",
                   "# TYPE tfhelm_reaper_reaps_total counter"]
            out += [sample_line("tfhelm_reaper_reaps_total", {"cluster": c, "action": a, "outcome": o}, n)
                    for (c, a, o), n in sorted(self.reaps.items())]
            out += ["# HELP tfhelm_reaper_reap_latency_seconds Seconds from the end of the grace "
                    "period to the end of the reap.",
                    "# TYPE tfhelm_reaper_reap_latency_seconds histogram"]
            out += [sample_line("tfhelm_reaper_reap_latency_seconds_bucket", {"le": f"{le:g}"}, n)
                    for le, n in zip(LATENCY_BUCKETS, self.buckets)]
            out += [sample_line("tfhelm_reaper_reap_latency_seconds_bucket", {"le": "+Inf"}, self.latency_count),
                    sample_line("tfhelm_reaper_reap_latency_seconds_sum", {}, self.latency_sum),
                    sample_line("tfhelm_reaper_reap_latency_seconds_count", {}, self.latency_count),
                    "# HELP tfhelm_reaper_errors_total Failed watches (the API server away) and "
                    "failed actions (retried).",
                    "# TYPE tfhelm_reaper_errors_total counter"]
            out += [sample_line("tfhelm_reaper_errors_total", {"kind": k}, n) for k, n in sorted(self.errors.items())]
            out += ["# HELP tfhelm_queue_waiting_since_seconds Since when (Unix time) a queued cluster's "
                    "workers wait for Kueue's admission (first, or again after a preemption); absent "
                    "while admitted.",
                    "# TYPE tfhelm_queue_waiting_since_seconds gauge"]
            out += [sample_line("tfhelm_queue_waiting_since_seconds", {"cluster": c}, t)
                    for c, t in sorted(self.waiting.items())]
            out += ["# HELP tfhelm_queue_wait_seconds Seconds queued clusters waited until Kueue "
                    "admitted their workers.",
                    "# TYPE tfhelm_queue_wait_seconds histogram"]
            out += [sample_line("tfhelm_queue_wait_seconds_bucket", {"le": f"{le:g}"}, n)
                    for le, n in zip(WAIT_BUCKETS, self.wait_buckets)]
            out += [sample_line("tfhelm_queue_wait_seconds_bucket", {"le": "+Inf"}, self.wait_count),
                    sample_line("tfhelm_queue_wait_seconds_sum", {}, self.wait_sum),
                    sample_line("tfhelm_queue_wait_seconds_count", {}, self.wait_count)]
        return "\n".join(out) + "\n"


def serve(metrics: ReaperMetrics, port: int, say: Callable[[str], None]):
    """Serve `metrics` at :port/metrics from a daemon thread; None if the port is taken."""
    return serve_metrics(port, metrics.render, say)
