"""The Prometheus Operator and Grafana objects of templates/monitoring/ (`monitoring:`), each
rendered only when enabled."""

from __future__ import annotations

import json
import re

import pytest

from tfhelm.pod.metrics import TaskMetrics
from tfhelm.cluster.manifests import by_kind, cluster_config, job_names
from tfhelm.errors import RenderError
from tfhelm.reaper.metrics import ReaperMetrics

from .conftest import helm, render
from .test_metrics_chart import ROLES

ALL_MONITORING = {"monitoring": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
                                 "dashboard": {"enabled": True}}}
MONITORING_KINDS = {"PodMonitor", "PrometheusRule"}


def monitoring_objects(manifests):
    return sorted((m["kind"], m["metadata"]["name"]) for m in manifests
                  if m["kind"] in MONITORING_KINDS
                  or (m["kind"] == "ConfigMap" and m["metadata"]["name"].endswith("-dashboard")))


# -- templates/monitoring/

@pytest.mark.parametrize("values,message", [
    ({"monitoring": {"podMonitor": {"interval": "often"}}}, "monitoring.podMonitor.interval:"),
    ({"monitoring": {"prometheusRule": {"stalledMinutes": 0}}}, "monitoring.prometheusRule.stalledMinutes: minimum"),
    ({"monitoring": {"dashboard": {"sidecarLabelValue": "not a label value"}}}, "monitoring.dashboard.sidecarLabelValue:"),
    ({"monitoring": {"grafana": {}}}, "monitoring: additional properties 'grafana' not allowed"),
])
def test_schema_rejects_bad_monitoring_values(values, message):
    with pytest.raises(RenderError, match=re.escape(message)):
        render(values)


def test_no_monitoring_objects_by_default():
    assert monitoring_objects(render(ROLES)) == []


def test_each_monitoring_object_behind_its_own_value():
    for key, kind, name in [("podMonitor", "PodMonitor", "mnist-tasks"),
                            ("prometheusRule", "PrometheusRule", "mnist-alerts"),
                            ("dashboard", "ConfigMap", "mnist-dashboard")]:
        assert monitoring_objects(render({"monitoring": {key: {"enabled": True}}})) == [(kind, name)]


def test_monitoring_lives_in_the_workload_release_only():
    workload = render({**ALL_MONITORING, "components": "workload"})
    assert len(monitoring_objects(workload)) == 3
    ps = render({**ALL_MONITORING, "components": "ps", "clusterName": "mnist"}, release="mnist-ps")
    assert monitoring_objects(ps) == []


def test_the_pod_monitor_selects_every_pod_of_a_split_cluster_by_its_metrics_port():
    """One PodMonitor in the workload release; its selector matches the PS pods of the other
    release (their `app.kubernetes.io/instance` differs) and the reaper, all on port `metrics`."""
    workload = render({**ROLES, **ALL_MONITORING, "components": "workload", "reaper": {"enabled": True},
                       "clusterName": "mnist"})
    ps = render({**ROLES, **ALL_MONITORING, "components": "ps", "clusterName": "mnist"}, release="mnist-ps")
    (pm,) = by_kind(workload, "PodMonitor")
    selector = pm["spec"]["selector"]["matchLabels"]
    assert pm["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}
    assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"]
    pods = {}
    for m in workload + ps:
        if m["kind"] in ("Job", "Deployment"):
            pods[m["metadata"]["name"]] = m["spec"]["template"]
    assert len(pods) == 6  # chief, evaluator, worker, 2 PS, reaper
    for name, template in pods.items():
        labels = template["metadata"]["labels"]
        assert selector.items() <= labels.items(), name
        ports = [p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])]
        assert "metrics" in ports, name


def test_a_pod_monitor_without_metrics_fails():
    with pytest.raises(RenderError, match="monitoring.podMonitor.enabled needs metrics.enabled"):
        render({"metrics": {"enabled": False}, "monitoring": {"podMonitor": {"enabled": True}}})


def test_monitoring_values_do_not_touch_the_task_pods():
    """Not part of the generation: turning alerts on does not rename (restart) the Jobs."""
    assert job_names(render(ROLES)) == job_names(render({**ROLES, **ALL_MONITORING}))
    assert cluster_config(render(ROLES))[1] == cluster_config(render({**ROLES, **ALL_MONITORING}))[1]


def test_labels_for_the_operators_selectors():
    manifests = render({"monitoring": {
        "podMonitor": {"enabled": True, "labels": {"release": "kps"}, "interval": "15s"},
        "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
        "dashboard": {"enabled": True, "labels": {"team": "ml"}, "annotations": {"grafana_folder": "Training"},
                      "sidecarLabel": "dashboards", "sidecarLabelValue": "tf"}}})
    (pm,), (rule,) = by_kind(manifests, "PodMonitor"), by_kind(manifests, "PrometheusRule")
    assert pm["metadata"]["labels"]["release"] == "kps" and rule["metadata"]["labels"]["release"] == "kps"
    assert pm["spec"]["podMetricsEndpoints"][0]["interval"] == "15s"
    (cm,) = [m for m in by_kind(manifests, "ConfigMap") if m["metadata"]["name"] == "mnist-dashboard"]
    assert cm["metadata"]["labels"]["dashboards"] == "tf" and cm["metadata"]["labels"]["team"] == "ml"
    assert "grafana_dashboard" not in cm["metadata"]["labels"]
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Training"}


# -- the rules and the dashboard speak of the metrics that exist

def exported_metrics() -> set[str]:
    """Every series name the launcher and the reaper export, and the ones kube-prometheus-stack
    brings (cAdvisor, kube-state-metrics)."""
    names = set(TaskMetrics.HELP)
    names |= {line.split()[2] for line in ReaperMetrics().render().splitlines() if line.startswith("# TYPE")}
    names |= {n + s for n in list(names) for s in ("_bucket", "_sum", "_count")}
    return names | {"kube_job_failed", "kube_pod_status_phase", "container_cpu_usage_seconds_total",
                    "container_memory_working_set_bytes"}


FUNCTIONS = {"max", "sum", "count", "changes", "rate", "deriv", "histogram_quantile", "by", "on",
             "and", "unless", "offset"}


def series_in(expr: str) -> set[str]:
    """Metric names of a PromQL expression (identifiers before `{`)."""
    return set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expr)) - FUNCTIONS


def balanced(expr: str) -> bool:
    depth = []
    pairs = {")": "(", "}": "{", "]": "["}
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr):
        if ch in "({[":
            depth.append(ch)
        elif ch in pairs and (not depth or depth.pop() != pairs[ch]):
            return False
    return not depth


def rules_of(manifests) -> list[dict]:
    (rule,) = by_kind(manifests, "PrometheusRule")
    (group,) = rule["spec"]["groups"]
    return group["rules"]


def test_the_alerts_use_only_exported_metrics_of_this_cluster():
    rules = rules_of(render({"monitoring": {"prometheusRule": {"enabled": True, "stalledMinutes": 20,
                                                                  "psOutliveMinutes": 7, "restarts": 2}}}))
    assert [r["alert"] for r in rules] == ["TFTrainingStalled", "TFParameterServersOutliveTraining",
                                           "TFTaskRestarting", "TFJobFailed"]
    known = exported_metrics()
    for r in rules:
        assert balanced(r["expr"]), r["expr"]
        assert series_in(r["expr"]) and series_in(r["expr"]) <= known, r["alert"]
        assert 'namespace="team-a"' in r["expr"], "scoped to this release's namespace"
        assert r["labels"]["severity"] == "warning" and r["annotations"]["summary"]
    by_name = {r["alert"]: r for r in rules}
    assert "[20m]" in by_name["TFTrainingStalled"]["expr"] and "offset 20m" in by_name["TFTrainingStalled"]["expr"]
    assert by_name["TFParameterServersOutliveTraining"]["for"] == "7m"
    assert by_name["TFTaskRestarting"]["expr"].endswith(">= 2")
    assert 'job_name=~"mnist-(chief|worker|evaluator)-[0-9a-f]{6}"' in by_name["TFJobFailed"]["expr"]
    # The Job names the regex must match:
    for job in job_names(render(ROLES)).values():
        assert re.fullmatch(r"mnist-(chief|worker|evaluator)-[0-9a-f]{6}", job), job


def dashboard_of(manifests) -> dict:
    (cm,) = [m for m in by_kind(manifests, "ConfigMap") if m["metadata"]["name"] == "mnist-dashboard"]
    (body,) = cm["data"].values()
    return json.loads(body)


def test_the_dashboard_is_grafana_json_about_this_cluster():
    d = dashboard_of(render({"monitoring": {"dashboard": {"enabled": True}}}))
    assert d["title"] == "tfhelm team-a/mnist" and re.fullmatch(r"tfhelm-[0-9a-f]{12}", d["uid"])
    titles = [p["title"] for p in d["panels"]]
    for wanted in ("Tasks by phase", "Steps per second", "Loss", "CPU", "Memory", "Reaps"):
        assert any(t.startswith(wanted) for t in titles), wanted
    ids = [p["id"] for p in d["panels"]]
    assert len(set(ids)) == len(ids)
    known = exported_metrics()
    for p in d["panels"]:
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        for t in p["targets"]:
            assert balanced(t["expr"]) and series_in(t["expr"]) <= known, t["expr"]
            assert 'namespace="team-a"' in t["expr"]
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    other = dashboard_of(render({"monitoring": {"dashboard": {"enabled": True}}}, namespace="team-b"))
    assert other["uid"] != d["uid"], "one dashboard per cluster"


def test_the_dashboards_pod_regex_matches_the_pod_names_kubernetes_makes():
    """cAdvisor and kube-state-metrics series carry pod names, not labels: a Job's pod is
    `<job>-<index>-<suffix>`, a Deployment's `<deployment>-<hash>-<suffix>`."""
    manifests = render({**ROLES, "reaper": {"enabled": True}, "monitoring": {"dashboard": {"enabled": True}}})
    expr = next(t["expr"] for p in dashboard_of(manifests)["panels"] if p["title"].startswith("CPU")
                for t in p["targets"])
    regex = re.search(r'pod=~"((?:[^"\\]|\\.)*)"', expr).group(1)
    names = [f"{job}-{i}-x7k2p" for job in job_names(manifests).values() for i in (0, 2)]
    names += [f"{d['metadata']['name']}-5d8f7c9b6-q2w3e" for d in by_kind(manifests, "Deployment")]
    assert len(names) == 9  # 3 Jobs x 2 tasks, 2 PS, the reaper
    for n in names:
        assert re.fullmatch(regex, n), n
    for stranger in ("mnist2-worker-0a1b2c-0-x7k2p", "mnist-tensorboard-5d8f7c9b6-q2w3e", "other-ps-0-a-b"):
        assert not re.fullmatch(regex, stranger), stranger


def test_two_renders_are_byte_identical(tf_chart):
    args = ["template", "mnist", tf_chart, "-n", "team-a", "--set", "monitoring.dashboard.enabled=true",
            "--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.podMonitor.enabled=true"]
    first, second = helm(*args), helm(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout


def test_notes_say_how_to_look_at_the_metrics_and_what_monitoring_was_made(tf_chart):
    def notes(*sets: str) -> str:
        args = sum((["--set", s] for s in sets), [])
        result = helm("install", "mnist", tf_chart, "-n", "team-a", "--dry-run=client", *args)
        assert result.returncode == 0, result.stderr
        return result.stdout.split("NOTES:", 1)[1]
    plain = notes()
    assert "port `metrics` (9090)" in plain and "curl -s localhost:9090/metrics" in plain
    assert "Monitoring:" not in plain
    assert "Monitoring: PodMonitor mnist-tasks, ConfigMap mnist-dashboard" in notes(
        "monitoring.podMonitor.enabled=true", "monitoring.dashboard.enabled=true")
    assert "metrics" not in notes("metrics.enabled=false")
    assert "metrics" not in notes("components=ps")
