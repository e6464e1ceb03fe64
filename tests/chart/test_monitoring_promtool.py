"""The rendered PrometheusRule, checked by Prometheus' own promtool (built from its Go module
by `make promtool`): its expressions parse (`promtool check rules`) and each alert fires when
it should and stays quiet when it should not (`promtool test rules`, on series made up here in
the shapes the launcher, the reaper and kube-state-metrics export)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tfhelm.cluster.manifests import by_kind

from .conftest import render

PROMTOOL = shutil.which("promtool") or str(Path(__file__).resolve().parents[2] / "bin" / "promtool")
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("TFHELM_REQUIRE_PROMTOOL") == "1"


@pytest.fixture(scope="module")
def promtool():
    if not os.access(PROMTOOL, os.X_OK):
        if REQUIRED:
            pytest.fail("promtool is missing: run `make promtool`")
        pytest.skip("promtool is missing: run `make promtool`")
    return PROMTOOL


@pytest.fixture(scope="module")
def rule_file(tmp_path_factory):
    """The PrometheusRule's spec as a plain rule file (what the operator hands Prometheus)."""
    manifests = render({"monitoring": {"prometheusRule": {"enabled": True, "stalledMinutes": 15,
                                                           "psOutliveMinutes": 10, "restarts": 1}}})
    (rule,) = by_kind(manifests, "PrometheusRule")
    path = tmp_path_factory.mktemp("rules") / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def run(promtool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_promtool_checks_the_rules(promtool, rule_file):
    result = run(promtool, "check", "rules", rule_file.name, cwd=rule_file.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 4 rules found" in result.stdout


TASK = 'namespace="team-a", cluster="mnist"'
PS0 = f'tfhelm_task_up{{{TASK}, role="ps", index="0", pod="mnist-ps-0-a-b"}}'
W0 = f'{{{TASK}, role="worker", index="0", pod="mnist-worker-0a1b2c-0-x"}}'

TESTS = [
    # Steps stop at 300 after 10 minutes: stalled once 15 minutes pass without a change (+1m for).
    {"interval": "1m",
     "input_series": [{"series": f'tfhelm_train_step{{{TASK}, role="worker", index="0", dir="train"}}',
                       "values": "0+30x10 300x30"}],
     "alert_rule_test": [
         {"eval_time": "12m", "alertname": "TFTrainingStalled", "exp_alerts": []},
         {"eval_time": "27m", "alertname": "TFTrainingStalled",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "team-a", "cluster": "mnist"},
                          "exp_annotations": {
                              "summary": "Training team-a/mnist made no step in 15 minutes",
                              "description": "tfhelm_train_step (the newest step in the TensorBoard event files under the run's log dir) has not changed for 15 minutes while the training runs. Look at the tasks' logs: `tfhelm logs mnist -n team-a`."}}]}]},
    # A training that keeps stepping, and one that just started, are not stalled; another
    # cluster's series are not this rule's business.
    {"interval": "1m",
     "input_series": [{"series": f'tfhelm_train_step{{{TASK}, role="worker", index="0", dir="train"}}',
                       "values": "0+10x40"},
                      {"series": 'tfhelm_train_step{namespace="team-a", cluster="other", dir="train"}',
                       "values": "5x40"}],
     "alert_rule_test": [{"eval_time": "40m", "alertname": "TFTrainingStalled", "exp_alerts": []}]},
    {"interval": "1m",
     "input_series": [{"series": f'tfhelm_train_step{{{TASK}, dir="train"}}', "values": "_x20 7x10"}],
     "alert_rule_test": [{"eval_time": "30m", "alertname": "TFTrainingStalled", "exp_alerts": []}]},
    # PS up; the workers (deciding completion) go away at 5m: the alert fires 10 minutes later.
    {"interval": "1m",
     "input_series": [{"series": PS0, "values": "1x40"},
                      {"series": f"tfhelm_task_decides_completion{W0}", "values": "1x5"}],
     "alert_rule_test": [
         {"eval_time": "5m", "alertname": "TFParameterServersOutliveTraining", "exp_alerts": []},
         {"eval_time": "14m", "alertname": "TFParameterServersOutliveTraining", "exp_alerts": []},
         {"eval_time": "25m", "alertname": "TFParameterServersOutliveTraining",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "team-a", "cluster": "mnist"},
                          "exp_annotations": {
                              "summary": "Parameter servers of team-a/mnist run 10 minutes after training",
                              "description": "The PS of mnist block in server.join() forever. Enable the reaper (reaper.enabled), or run `tfhelm reap mnist -n team-a` (or `tfhelm down`)."}}]}]},
    # While a deciding task runs, PS are expected.
    {"interval": "1m",
     "input_series": [{"series": PS0, "values": "1x40"},
                      {"series": f"tfhelm_task_decides_completion{W0}", "values": "1x40"}],
     "alert_rule_test": [{"eval_time": "30m", "alertname": "TFParameterServersOutliveTraining", "exp_alerts": []}]},
    # Worker 2's second attempt (its index failed once), over two pods: one alert for the task.
    {"interval": "1m",
     "input_series": [
         {"series": f'tfhelm_task_restarts_total{{{TASK}, role="worker", index="2", pod="mnist-worker-0a1b2c-2-a"}}',
          "values": "0x3"},
         {"series": f'tfhelm_task_restarts_total{{{TASK}, role="worker", index="2", pod="mnist-worker-0a1b2c-2-b"}}',
          "values": "_x4 1x5"},
         {"series": f'tfhelm_task_restarts_total{{{TASK}, role="ps", index="0", pod="mnist-ps-0-a-b"}}',
          "values": "0x10"}],
     "alert_rule_test": [
         {"eval_time": "2m", "alertname": "TFTaskRestarting", "exp_alerts": []},
         {"eval_time": "6m", "alertname": "TFTaskRestarting",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "team-a", "cluster": "mnist",
                                         "role": "worker", "index": "2"},
                          "exp_annotations": {
                              "summary": "A task of team-a/mnist was restarted",
                              "description": "Task worker:2 runs its attempt 1 + 1 (failed pods of its Job index, and container restarts). `tfhelm status mnist -n team-a` says why."}}]}]},
    # kube-state-metrics: this cluster's worker Job failed; another cluster's does not count.
    {"interval": "1m",
     "input_series": [
         {"series": 'kube_job_failed{namespace="team-a", job_name="mnist-worker-0a1b2c", condition="true"}', "values": "0 0 1 1"},
         {"series": 'kube_job_failed{namespace="team-a", job_name="mnist-worker-0a1b2c", condition="false"}', "values": "1 1 0 0"},
         {"series": 'kube_job_failed{namespace="team-a", job_name="mnist2-worker-0a1b2c", condition="true"}', "values": "1 1 1 1"}],
     "alert_rule_test": [
         {"eval_time": "1m", "alertname": "TFJobFailed", "exp_alerts": []},
         {"eval_time": "3m", "alertname": "TFJobFailed",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "team-a", "job_name": "mnist-worker-0a1b2c"},
                          "exp_annotations": {
                              "summary": "Job team-a/mnist-worker-0a1b2c of training mnist failed",
                              "description": "`tfhelm status mnist -n team-a` shows each task's error line."}}]}]},
]


def test_promtool_tests_every_alert(promtool, rule_file):
    tests = rule_file.parent / "tests.yaml"
    tests.write_text(yaml.safe_dump({"rule_files": [rule_file.name], "evaluation_interval": "1m",
                                     "tests": TESTS}, sort_keys=False, width=1000))
    result = run(promtool, "test", "rules", tests.name, cwd=rule_file.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_tests_the_queue_alert(promtool, tmp_path):
    """A queued cluster's alert (queue.name): fires once the in-cluster controller's gauge says
    it has waited longer than queuedMinutes; quiet while it has not, and once admitted (the
    gauge is gone)."""
    manifests = render({"queue": {"name": "team"}, "monitoring": {"prometheusRule": {"enabled": True, "queuedMinutes": 30}}})
    (rule,) = by_kind(manifests, "PrometheusRule")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    since = 'tfhelm_queue_waiting_since_seconds{namespace="team-a", cluster="mnist", pod="mnist-reaper-a-b"}'
    tests = [{"interval": "1m",
              # Waiting since t=0 (Unix 0 in promtool's clock); admitted at minute 50 (the series ends).
              "input_series": [{"series": since, "values": "0x50"}],
              "alert_rule_test": [
                  {"eval_time": "25m", "alertname": "TFTrainingQueuedTooLong", "exp_alerts": []},
                  {"eval_time": "40m", "alertname": "TFTrainingQueuedTooLong",
                   "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "team-a", "cluster": "mnist"},
                                   "exp_annotations": {
                                       "summary": "Training team-a/mnist has waited in queue team for more than 30 minutes",
                                       "description": "Kueue has not admitted the workers of mnist (LocalQueue team). "
                                                      "`tfhelm status mnist -n team-a` says why: which resource, how much "
                                                      "of it is in use, or the workload ahead of it."}}]},
                  {"eval_time": "60m", "alertname": "TFTrainingQueuedTooLong", "exp_alerts": []}]}]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
                                                         "tests": tests}, sort_keys=False, width=1000))
    result = run(promtool, "test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
