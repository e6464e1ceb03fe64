"""Prometheus' text format, served: the tasks' metrics (tfhelm.pod.metrics) and the reaper's
(tfhelm.reaper.metrics) alike, on the pods' server (tfhelm.pod.httpd)."""

from __future__ import annotations

from tfhelm.pod import httpd
from tfhelm.pod.logs import log

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def sample_line(name: str, labels: dict, value) -> str:
    """One sample in Prometheus' text format, label values escaped (the reaper's too)."""
    esc = lambda v: str(v).replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")  # noqa: E731
    inside = ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())
    return f"{name}{{{inside}}} {float(value)!r}" if inside else f"{name} {float(value)!r}"


def serve_metrics(port: int, render, say=None, **limits):
    """Serve `render()` as Prometheus text at /metrics on `port` (all addresses, IPv6 and
    IPv4) from daemon threads (tfhelm.pod.httpd); the server, or None if the port is taken
    (said: metrics never stop a training). The reaper serves its own metrics with this too
    (`say`: its log)."""
    say = say or log

    def handle(request: httpd.Request) -> httpd.Response:
        if request.method not in ("GET", "HEAD"):
            return httpd.text(405, "405: GET /metrics\n", [("Allow", "GET, HEAD")])
        if request.path not in ("/metrics", "/"):
            return httpd.text(404, "404: GET /metrics\n")
        return httpd.text(200, render(), content_type=CONTENT_TYPE)

    try:
        server = httpd.Server(handle, port, max_head=8192, name="tfhelm-metrics", **limits).start()
    except OSError as e:
        say(f"warning: metrics not served: port {port}: {e.strerror}")
        return None
    say(f"metrics on :{server.port}/metrics")
    return server
