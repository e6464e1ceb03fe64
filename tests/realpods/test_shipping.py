"""On the real nodes: `helm test` runs the chart's test pod, which checks every task's DNS
name and TF_CONFIG from inside the cluster, and `tfhelm logs` shows every task's log."""

from __future__ import annotations

import yaml

from tfhelm.chart import chart_path

from .conftest import run, wait_for

SMALL = ["--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi"]


def test_helm_test_and_tfhelm_logs_on_a_serving_cluster(namespace):
    # In-graph without a chief: workers and PS only run TF servers, so every task's DNS
    # name stays (an outside client, e.g. a notebook, would drive them).
    values = {"mode": "in-graph", "worker": {"replicas": 2}, "ps": {"replicas": 1}}
    run("helm", "install", "srv", str(chart_path()), "-n", namespace, "-f", "-", *SMALL,
        "--wait", "--timeout", "10m", stdin=yaml.safe_dump(values))

    tested = run("helm", "test", "srv", "-n", namespace, "--logs", "--timeout", "10m")
    assert "TF_CONFIG valid for 3 task(s)" in tested.stdout, tested.stdout
    assert "OK: every task's DNS name resolves" in tested.stdout, tested.stdout

    def serving() -> str | None:
        out = run("tfhelm", "logs", "srv", "-n", namespace).stdout
        done = all(any(ln.startswith(f"[{t}]") and "serving on" in ln for ln in out.splitlines())
                   for t in ("worker-0", "worker-1", "ps-0"))
        return out if done else None
    out = wait_for(serving, 300, interval=3, what="every task's log to say it serves")
    assert "[worker-1]" in out and "[ps-0]" in out
