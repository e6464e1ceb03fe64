"""A real training's metrics, scraped over the pod network: by a pod, and by a real
Prometheus (built from its Go module) on the host that discovers the task pods through the
Kubernetes API with the same selection the chart's PodMonitor makes. Worker 0's launcher
reports the steps and loss its script writes with tf.summary, every task reports up, and the
in-cluster reaper counts its reap."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import yaml
from kubernetes import client

from tests.cluster.conftest import job_of
from tests.cluster.test_localcluster import job_condition
from tests.unit.test_launcher_metrics import parse_text
from tfhelm.chart import chart_path
from tfhelm.cluster.manifests import by_kind, render
from tfhelm_dev import localnet

PROMETHEUS = Path(__file__).resolve().parents[2] / "bin" / "prometheus"

from .conftest import pod_logs, run, wait_for

# The user's script: nothing about metrics, only summaries as TensorBoard wants them (flushed
# often, so the test sees several steps while it runs; TensorFlow's default is every 2 min).
SCRIPT = """
import os, sys, time
import tensorflow as tf
index = int(os.environ["TFHELM_TASK_INDEX"])
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
if index == 0:
    writer = tf.summary.create_file_writer(os.path.join(os.environ["TFHELM_LOG_DIR"], "train"))
    with writer.as_default():
        for step in range(1, steps + 1):
            tf.summary.scalar("loss", 1.0 / step, step=step)
            writer.flush()
            time.sleep(0.5)
print("done", index)
"""

SCRAPE = """
import json, sys, time, urllib.request
url, seconds = sys.argv[1], float(sys.argv[2])
end, seen = time.time() + seconds, False
while time.time() < end:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            print(json.dumps({"text": r.read().decode()}), flush=True)
            seen = True
    except Exception as e:
        print(json.dumps({"error": str(e)}), flush=True)
        if seen:
            break  # the task ended
    time.sleep(0.5)
"""


def scrape_pod(core, namespace: str, url: str, seconds: int) -> str:
    """Start a pod that scrapes `url` every half second for up to `seconds` (or until the
    target goes away after answering); its name."""
    name = f"scrape-{uuid.uuid4().hex[:6]}"
    security = client.V1SecurityContext(allow_privilege_escalation=False, run_as_non_root=True,
                                        run_as_user=1000, capabilities=client.V1Capabilities(drop=["ALL"]),
                                        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(restart_policy="Never", automount_service_account_token=False, containers=[
            client.V1Container(name="scrape", image="tensorflow/tensorflow:2.21.0", security_context=security,
                               command=["python3", "-c", SCRAPE, url, str(seconds)])])))
    return name


def scrapes(core, namespace: str, name: str) -> list[dict]:
    wait_for(lambda: core.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed"),
             600, interval=2, what=f"scrape pod {namespace}/{name}")
    lines = core.read_namespaced_pod_log(name, namespace).splitlines()
    return [parse_text(r["text"]) for r in map(json.loads, lines) if "text" in r]


def pod_ip(core, namespace: str, selector: str) -> str:
    def running():
        pods = [p for p in core.list_namespaced_pod(namespace, label_selector=selector).items
                if p.status.phase == "Running" and p.status.pod_ip]
        return pods[0].status.pod_ip if pods else None
    return wait_for(running, 300, interval=1, what=f"a running pod {selector}")


def test_a_real_training_exports_its_steps_loss_and_the_reap(namespace, core, api_client, nodes):
    batch, apps = client.BatchV1Api(api_client), client.AppsV1Api(api_client)
    values = {"worker": {"replicas": 2}, "ps": {"replicas": 1},
              "code": {"source": "inline", "script": "train.py", "inline": SCRIPT},
              "reaper": {"enabled": True, "grace": 1},
              "storage": {"data": {"size": "64Mi"}, "logs": {"size": "64Mi"}}}
    run("helm", "install", "ob", str(chart_path()), "-n", namespace, "-f", "-",
        *nodes.pin("worker", nodes.training[0]), *nodes.pin("ps", nodes.training[1]), stdin=yaml.safe_dump(values))
    worker0 = pod_ip(core, namespace, "tfhelm.io/cluster=ob,app.kubernetes.io/component=worker,"
                                      "batch.kubernetes.io/job-completion-index=0")
    ps0 = pod_ip(core, namespace, "tfhelm.io/cluster=ob,app.kubernetes.io/component=ps")
    training = scrape_pod(core, namespace, f"http://{worker0}:9090/metrics", 300)
    ps_scrape = scrape_pod(core, namespace, f"http://{ps0}:9090/metrics", 3)
    workers = job_of(namespace, "ob", "worker")
    assert wait_for(lambda: job_condition(batch, namespace, workers), 600, interval=2,
                    what="the worker Job to finish") == "Complete", pod_logs(core, namespace, "tfhelm.io/cluster=ob")

    task = {"cluster": "ob", "role": "worker", "index": "0"}
    seen = scrapes(core, namespace, training)
    assert seen, "worker 0 never answered on its metrics port"
    at = frozenset({**task, "dir": "train"}.items())
    steps = [s[("tfhelm_train_step", at)] for s in seen if ("tfhelm_train_step", at) in s]
    assert len(set(steps)) >= 3 and steps == sorted(steps) and steps[-1] <= 30, steps
    losses = [s[("tfhelm_train_scalar", at | {("tag", "loss")})] for s in seen
              if ("tfhelm_train_scalar", at | {("tag", "loss")}) in s]
    assert losses and min(losses) < 1.0 and losses == sorted(losses, reverse=True), losses
    first = seen[0]
    assert first[("tfhelm_task_up", frozenset(task.items()))] == 1
    assert first[("tfhelm_task_restarts_total", frozenset(task.items()))] == 0
    assert first[("tfhelm_task_decides_completion", frozenset(task.items()))] == 1

    (ps,) = scrapes(core, namespace, ps_scrape)[:1]
    ps_task = frozenset({"cluster": "ob", "role": "ps", "index": "0"}.items())
    assert ps[("tfhelm_task_up", ps_task)] == 1 and ("tfhelm_task_decides_completion", ps_task) not in ps
    assert not [k for k in ps if k[0] == "tfhelm_train_step"], "only the first task reads the event files"

    wait_for(lambda: not apps.list_namespaced_deployment(
        namespace, label_selector="app.kubernetes.io/component=ps").items, 180, interval=1,
        what="the reaper to remove the PS Deployment")
    reaper = pod_ip(core, namespace, "tfhelm.io/cluster=ob,app.kubernetes.io/component=reaper")
    (reaped,) = scrapes(core, namespace, scrape_pod(core, namespace, f"http://{reaper}:9090/metrics", 3))[:1]
    assert reaped[("tfhelm_reaper_reaps_total", frozenset(
        {"cluster": "ob", "action": "reap", "outcome": "Complete"}.items()))] == 1
    assert reaped[("tfhelm_reaper_reap_latency_seconds_count", frozenset())] == 1
    assert reaped[("tfhelm_reaper_clusters_watched", frozenset())] == 1


def prometheus_config(podmonitor: dict, kubeconfig: str, namespace: str) -> dict:
    """The scrape job the Prometheus Operator makes of a PodMonitor (Kubernetes pod discovery,
    the selector's labels and the endpoint's port kept, finished pods dropped, namespace, pod
    and container as target labels), from the chart's rendered PodMonitor."""
    spec = podmonitor["spec"]
    (endpoint,) = spec["podMetricsEndpoints"]
    keep = [{"source_labels": ["__meta_kubernetes_pod_label_" + k.replace(".", "_").replace("/", "_").replace("-", "_")],
             "regex": v, "action": "keep"} for k, v in spec["selector"]["matchLabels"].items()]
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [{
            "job_name": f"podMonitor/{namespace}/{podmonitor['metadata']['name']}/0",
            "metrics_path": endpoint["path"],
            "kubernetes_sd_configs": [{"role": "pod", "kubeconfig_file": kubeconfig,
                                       "namespaces": {"names": spec["namespaceSelector"]["matchNames"]}}],
            "relabel_configs": [
                {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)", "action": "drop"},
                *keep,
                {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": endpoint["port"], "action": "keep"},
                {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            ]}]}


def promql(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_prometheus_discovers_and_scrapes_a_real_training(namespace, core, api_client, nodes, kubeconfig, tmp_path):
    assert PROMETHEUS.exists(), "bin/prometheus missing: `make prometheus`"
    batch = client.BatchV1Api(api_client)
    values = {"worker": {"replicas": 2}, "ps": {"replicas": 1},
              "code": {"source": "inline", "script": "train.py", "inline": SCRIPT, "args": ["80"]},
              "reaper": {"enabled": True, "grace": 1},
              "monitoring": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
              "storage": {"data": {"size": "64Mi"}, "logs": {"size": "64Mi"}}}
    manifests = render(values, "ob", namespace)
    (podmonitor,), (rule,) = by_kind(manifests, "PodMonitor"), by_kind(manifests, "PrometheusRule")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(prometheus_config(podmonitor, str(kubeconfig), namespace)))
    port = 19090 + int(uuid.uuid4().hex[:3], 16) % 500
    prom = subprocess.Popen([str(PROMETHEUS), "--config.file=prometheus.yml", "--storage.tsdb.path=data",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=os.environ)
    try:
        # The chart's own objects (CRDs absent here: Prometheus reads the PodMonitor's selection above).
        # The cluster's fence admits this Prometheus, on the host, to the metrics ports only.
        install = {k: v for k, v in values.items() if k != "monitoring"}
        install["networkPolicy"] = {"metricsFrom": [{"ipBlock": {"cidr": f"{localnet.HOST_IP}/32"}}]}
        run("helm", "install", "ob", str(chart_path()), "-n", namespace, "-f", "-",
            *nodes.pin("worker", nodes.training[0]), *nodes.pin("ps", nodes.training[1]), stdin=yaml.safe_dump(install))
        at = f'namespace="{namespace}", cluster="ob"'
        worker0 = wait_for(lambda: promql(port, f'tfhelm_task_up{{{at}, role="worker", index="0"}} == 1'),
                           300, interval=1, what="Prometheus to scrape worker 0")
        assert worker0[0]["metric"]["pod"].startswith("ob-worker-") and worker0[0]["metric"]["container"] == "tensorflow"
        ps = wait_for(lambda: promql(port, f'tfhelm_task_up{{{at}, role="ps"}} == 1'), 120, interval=1,
                      what="Prometheus to scrape the PS")
        assert ps[0]["metric"]["index"] == "0"
        wait_for(lambda: promql(port, f'changes(tfhelm_train_step{{{at}, dir="train"}}[5m]) >= 3'), 300,
                 interval=1, what="three step changes scraped")
        loss = promql(port, f'tfhelm_train_scalar{{{at}, dir="train", tag="loss"}}')
        assert loss and 0 < float(loss[0]["value"][1]) < 1, loss
        workers = job_of(namespace, "ob", "worker")
        assert wait_for(lambda: job_condition(batch, namespace, workers), 600, interval=2,
                        what="the worker Job to finish") == "Complete"
        reaps = wait_for(lambda: promql(port, f'tfhelm_reaper_reaps_total{{{at}, action="reap", outcome="Complete"}} == 1'),
                         180, interval=1, what="Prometheus to see the reap")
        assert reaps[0]["metric"]["pod"].startswith("ob-reaper-")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/rules", timeout=10) as r:
            rules = [x for g in json.load(r)["data"]["groups"] for x in g["rules"]]
        assert len(rules) == 4 and all(x["health"] == "ok" for x in rules), rules
    finally:
        prom.terminate()
        prom.wait(timeout=30)
