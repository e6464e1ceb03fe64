"""The reaper's Prometheus metrics, from a Reaper driven by the fake API of test_reaper, and
served over HTTP as `tfhelm reap --metrics-port` serves them."""

from __future__ import annotations

import urllib.request

from tests.unit.test_launcher_metrics import parse_text
from tests.unit.test_reaper import FakeClient, job
from tfhelm import reaper
from tfhelm.reaper import default_config
from tfhelm.reaper.metrics import ReaperMetrics, serve


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, frozenset(labels.items())))


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_a_reap_is_counted_with_its_latency_after_the_grace():
    fc = FakeClient(job(state="Complete", succeeded=2))
    m = ReaperMetrics()
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=0), backoff=(0.01, 0.05),
                        log_line=lambda _: None, metrics=m).run()
    assert res.action == reaper.REAP
    s = parse_text(m.render())
    assert value(s, "tfhelm_reaper_reaps_total", cluster="c", action="reap", outcome="Complete") == 1
    assert value(s, "tfhelm_reaper_clusters_watched") == 1
    assert value(s, "tfhelm_reaper_reap_latency_seconds_count") == 1
    assert value(s, "tfhelm_reaper_reap_latency_seconds_bucket", le="+Inf") == 1
    assert value(s, "tfhelm_reaper_errors_total", kind="action") == 0


def test_a_kept_failure_is_counted_without_latency():
    fc = FakeClient(job(state="Failed", failed=3))
    m = ReaperMetrics()
    reaper.Reaper(fc, "ns", "c", default_config(grace=0), backoff=(0.01, 0.05), log_line=lambda _: None,
                  metrics=m).run()
    s = parse_text(m.render())
    assert value(s, "tfhelm_reaper_reaps_total", cluster="c", action="keep", outcome="Failed") == 1
    assert value(s, "tfhelm_reaper_reap_latency_seconds_count") == 0


def test_failed_watches_and_actions_are_errors():
    fc = FakeClient(job(state="Complete", succeeded=2))
    fc.watch_failures = [ConnectionRefusedError("apiserver down")] * 2
    fc.uninstall_failures = [RuntimeError("connection refused")]
    m = ReaperMetrics()
    reaper.Reaper(fc, "ns", "c", default_config(grace=0), backoff=(0.01, 0.05), log_line=lambda _: None,
                  metrics=m).run()
    s = parse_text(m.render())
    assert value(s, "tfhelm_reaper_errors_total", kind="action") == 1
    assert value(s, "tfhelm_reaper_reaps_total", cluster="c", action="reap", outcome="Complete") == 1


def test_latency_buckets_are_cumulative():
    m = ReaperMetrics(clock=Clock())
    for latency in (0.2, 3, 3, 4000):
        m.done("c", "reap", "Complete", latency)
    s = parse_text(m.render())
    assert value(s, "tfhelm_reaper_reap_latency_seconds_bucket", le="0.5") == 1
    assert value(s, "tfhelm_reaper_reap_latency_seconds_bucket", le="5") == 3
    assert value(s, "tfhelm_reaper_reap_latency_seconds_bucket", le="900") == 3
    assert value(s, "tfhelm_reaper_reap_latency_seconds_bucket", le="+Inf") == 4
    assert value(s, "tfhelm_reaper_reap_latency_seconds_sum") == 4006.2
    assert value(s, "tfhelm_reaper_start_time_seconds") == 1_000_000.0


def test_served_over_http():
    m = ReaperMetrics()
    m.watching(3)
    lines: list[str] = []
    server = serve(m, 0, lines.append)
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            s = parse_text(r.read().decode())
        assert value(s, "tfhelm_reaper_clusters_watched") == 3
        assert lines == [f"metrics on :{port}/metrics"]
    finally:
        server.close()
