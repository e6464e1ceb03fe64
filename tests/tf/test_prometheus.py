"""A real Prometheus (built from its Go module, `make prometheus`) scrapes a real task: the
launcher in script mode, its script writing summaries with TensorFlow. The test asks
Prometheus' HTTP API what it saw - up, a step series that increases, the loss - and loads the
chart's rendered PrometheusRule, whose four rules Prometheus evaluates without error on
those series. The reaper's endpoint is scraped beside it after a reap."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.unit.test_reaper import FakeClient, job
from tfhelm import reaper
from tfhelm.cluster.localrun import LAUNCHER
from tfhelm.cluster.manifests import by_kind, render
from tfhelm.reaper import default_config
from tfhelm.reaper.metrics import ReaperMetrics, serve

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus") or str(REPO / "bin" / "prometheus")
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("TFHELM_REQUIRE_TF") == "1"

SCRIPT = """
import os, time
import tensorflow as tf
from tensorflow.core.framework import summary_pb2
scalars = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
writer = tf.summary.create_file_writer(os.path.join(os.environ["TFHELM_LOG_DIR"], "train"))
with writer.as_default():
    for step in range(1, 1000):
        tf.summary.write("loss", tf.constant(1.0 / step), step=step, metadata=scalars)
        writer.flush()
        if os.path.exists(os.environ["DONE"]):
            break
        time.sleep(0.2)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


def wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def prometheus_bin():
    if not os.access(PROMETHEUS, os.X_OK):
        if REQUIRED:
            pytest.fail("prometheus is missing: run `make prometheus`")
        pytest.skip("prometheus is missing: run `make prometheus`")
    return PROMETHEUS


@pytest.mark.needs_tf
def test_prometheus_scrapes_a_real_task_and_evaluates_the_charts_rules(tmp_path, prometheus_bin):
    task_port, reaper_port, prom_port = free_port(), free_port(), free_port()
    logs, done = tmp_path / "logs", tmp_path / "done"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TFHELM_CLUSTER": "mnist", "TFHELM_TASK_TYPE": "worker",
           "TFHELM_TASK_INDEX": "0", "TF_CONFIG": json.dumps({"cluster": {"worker": ["localhost:1"]},
                                                             "task": {"type": "worker", "index": 0}}),
           "TFHELM_METRICS_PORT": str(task_port), "TFHELM_LOG_DIR": str(logs),
           "TFHELM_STATE_DIR": str(tmp_path), "DONE": str(done)}
    # The reaper's endpoint, after a reap (of the fake API's cluster).
    metrics = ReaperMetrics()
    reaper.Reaper(FakeClient(job(state="Complete", succeeded=2)), "team-a", "c", default_config(grace=0),
                  backoff=(0.01, 0.05), log_line=lambda _: None, metrics=metrics).run()
    reaper_server = serve(metrics, reaper_port, lambda _: None)

    (rule,) = by_kind(render({"monitoring": {"prometheusRule": {"enabled": True}}}, "mnist", "team-a"),
                      "PrometheusRule")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    # What the PodMonitor's targets carry: namespace and pod from Kubernetes service discovery.
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [
            {"job_name": "tasks", "static_configs": [{"targets": [f"127.0.0.1:{task_port}"],
                                                        "labels": {"namespace": "team-a", "pod": "mnist-worker-0a1b2c-0-x"}}]},
            {"job_name": "reaper", "static_configs": [{"targets": [f"127.0.0.1:{reaper_port}"],
                                                         "labels": {"namespace": "team-a", "pod": "mnist-reaper-a-b"}}]}]}))
    task = subprocess.Popen([sys.executable, str(LAUNCHER), "script", str(script)], env=env,
                            stderr=subprocess.PIPE, text=True)
    prom = subprocess.Popen([prometheus_bin, "--config.file=prometheus.yml", "--storage.tsdb.path=data",
                             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait(lambda: _answers(prom_port), 60, "Prometheus to start")
        sel = 'cluster="mnist", role="worker", index="0"'
        up = wait(lambda: query(prom_port, f'tfhelm_task_up{{{sel}}} == 1'), 60, "tfhelm_task_up")
        assert up[0]["metric"]["namespace"] == "team-a" and query(prom_port, 'up{job="tasks"} == 1')
        # The step series increases while the script runs (Prometheus computes it).
        rising = wait(lambda: query(prom_port, f'changes(tfhelm_train_step{{{sel}, dir="train"}}[1m]) >= 3'),
                      90, "three step changes scraped")
        assert rising[0]["metric"]["dir"] == "train"
        loss = query(prom_port, f'tfhelm_train_scalar{{{sel}, dir="train", tag="loss"}}')
        step = query(prom_port, f'tfhelm_train_step{{{sel}, dir="train"}}')
        assert 0 < float(loss[0]["value"][1]) < 1 and float(step[0]["value"][1]) >= 3
        assert float(loss[0]["value"][1]) == pytest.approx(1 / float(step[0]["value"][1]), rel=0.2)
        reaps = query(prom_port, 'tfhelm_reaper_reaps_total{cluster="c", action="reap", outcome="Complete"}')
        assert [float(r["value"][1]) for r in reaps] == [1.0]
        # The chart's rules load and evaluate on these series without an error.
        with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/rules", timeout=10) as r:
            groups = json.load(r)["data"]["groups"]
        rules = wait(lambda: _evaluated(prom_port), 30, "every rule evaluated")
        assert sorted(r["name"] for r in rules) == sorted(
            ["TFTrainingStalled", "TFParameterServersOutliveTraining", "TFTaskRestarting", "TFJobFailed"]), groups
        assert all(r["health"] == "ok" for r in rules), rules
        assert not [r for r in rules if r["state"] == "firing"], "a training that steps, no PS: nothing fires"
    finally:
        done.touch()
        try:
            task.wait(timeout=60)
        finally:
            task.kill()
            prom.terminate()
            prom.wait(timeout=30)
            reaper_server.close()
    assert task.returncode == 0, task.stderr.read()


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _evaluated(port: int) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/rules", timeout=10) as r:
        rules = [rule for g in json.load(r)["data"]["groups"] for rule in g["rules"]]
    return rules if rules and all(r.get("lastEvaluation", "").startswith("20") for r in rules) else []
