"""Reaped by default, on every path: a cluster installed with the chart's defaults - plain
`helm install` plus a script and nothing else, `tfhelm up` without `--reap`, an in-graph
cluster with an evaluator - loses its parameter servers (and in-graph worker servers) once the
deciding Job succeeded and the grace period (30 s by default) passed, removed by the chart's
own reaper (the tasks' image, the program the chart ships); PVCs and Jobs stay. Each test
watches the API server and checks the order of what happened; it prints the latencies it
measured rather than asserting a time."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client, watch

from tests.cluster.conftest import job_of
from tfhelm.chart import chart_path, default_values

from .conftest import pod_logs, run, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GRACE = default_values()["reaper"]["grace"]
SUCCESS = ("SuccessCriteriaMet", "Complete")


@dataclass
class Timeline:
    """What the API server reported about one cluster, with when this test saw it (the
    machine's clock, which the reaper and the kubelet share): the deciding Job's success, the
    reaper's Events, the PS Deployments' and pods' deletion. Watches, not polls."""
    api: client.ApiClient
    namespace: str
    cluster: str
    seen: dict[str, float] = field(default_factory=dict)
    events: dict[str, client.CoreV1Event] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "Timeline":
        sel = f"tfhelm.io/cluster={self.cluster}"
        core, batch, apps = client.CoreV1Api(self.api), client.BatchV1Api(self.api), client.AppsV1Api(self.api)
        for name, lister, selector in (("jobs", batch.list_namespaced_job, sel),
                                       ("deployments", apps.list_namespaced_deployment, f"{sel},tfhelm.io/role=ps"),
                                       ("pods", core.list_namespaced_pod, f"{sel},tfhelm.io/role=ps"),
                                       ("events", core.list_namespaced_event, None)):
            threading.Thread(target=self._watch, args=(name, lister, selector), daemon=True).start()
        return self

    def _watch(self, name, lister, selector) -> None:
        """Each new watch goes on from the last event seen, so no deletion falls between two."""
        version = None
        while not self.stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(lister, self.namespace, label_selector=selector, timeout_seconds=30,
                                   **({"resource_version": version} if version else {})):
                    version = ev["object"].metadata.resource_version
                    self._note(name, ev["type"], ev["object"])
                    if self.stop.is_set():
                        w.stop()
            except client.ApiException as e:  # 410: that version is gone; list (ADDED) and go on
                version = None if e.status == 410 else version
                self.stop.wait(1)
            except Exception:  # noqa: BLE001 - a dropped watch: watch again from the last event
                self.stop.wait(1)

    def _note(self, name: str, kind: str, obj) -> None:
        now = time.time()
        if name == "jobs" and obj.metadata.labels.get("tfhelm.io/role") == self.deciding:
            if any(c.type in SUCCESS and c.status == "True" for c in obj.status.conditions or []):
                self.seen.setdefault("job succeeded", now)
        elif name in ("deployments", "pods") and kind == "DELETED":
            self.seen.setdefault(f"ps {name} deleted", now)
        elif name == "events" and (obj.reason or "").startswith("TFCluster") \
                and obj.involved_object.name.startswith(f"{self.cluster}-"):
            self.seen.setdefault(obj.reason, now)
            self.events[obj.reason] = obj

    deciding: str = "worker"

    def reaped(self, core) -> None:
        """Until the chart's reaper has reaped this cluster; then the checks and the report."""
        pod = reaper_pod(core, self.namespace, self.cluster)
        self.wait("job succeeded")
        self.wait("ps pods deleted", GRACE + 120)
        self.wait("TFClusterReaped", 60)
        self.stop.set()
        # The training ended when the deciding tasks' last container did (the kubelet's stamp,
        # whole seconds): the reaper sees it from the pods, before the Job controller says so.
        tasks = core.list_namespaced_pod(self.namespace, label_selector=f"tfhelm.io/cluster={self.cluster},"
                                                                        f"tfhelm.io/role={self.deciding}").items
        ends = [s.state.terminated.finished_at for p in tasks for s in p.status.container_statuses or []
                if s.name == "tensorflow" and s.state.terminated and s.state.terminated.exit_code == 0]
        assert ends, "the deciding tasks succeeded"
        self.seen["tasks succeeded"] = max(ends).timestamp()
        self.report(pod)

    def wait(self, what: str, timeout: float = 600) -> float:
        return wait_for(lambda: self.seen.get(what), timeout, interval=0.2, what=f"{what} ({self.cluster})")

    def report(self, reaper_pod: str) -> None:
        """The order, the reaper's own word for it, and the measured latencies."""
        seen, reaping, reaped = self.seen, self.events["TFClusterReaping"], self.events["TFClusterReaped"]
        # The stamps with whole seconds (the kubelet's, the reaper's Events') keep their order;
        # this test's own observations are compared with each other.
        assert int(seen["tasks succeeded"]) <= reaping.first_timestamp.timestamp(), (seen, reaping.first_timestamp)
        assert seen["TFClusterReaping"] < seen["ps deployments deleted"] <= seen["ps pods deleted"], seen
        # Never before the grace: the PS go a grace period after the training's end (counted
        # from when the reaper saw it, or the server's stamp rounded up: never earlier).
        assert seen["ps deployments deleted"] - seen["tasks succeeded"] >= GRACE - 1, seen
        assert (reaped.source.component, reaped.reporting_component) == ("tfhelm-reaper", "tfhelm.io/reaper")
        assert reaped.reporting_instance == reaper_pod, "the chart's reaper did it, nothing else"
        t0 = seen["tasks succeeded"]
        print(f"\n{self.cluster}: after the deciding tasks succeeded (kubelet stamp, whole seconds): "
              f"TFClusterReaping seen {seen['TFClusterReaping'] - t0:.2f}s, the Job's success condition seen "
              f"{seen['job succeeded'] - t0:.2f}s, PS Deployment deleted {seen['ps deployments deleted'] - t0:.2f}s "
              f"(grace {GRACE}s), PS pod gone {seen['ps pods deleted'] - t0:.2f}s")


def reaper_pod(core, ns: str, cluster: str) -> str:
    def running():
        pods = core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster={cluster},"
                                                           "app.kubernetes.io/component=reaper").items
        return pods[0].metadata.name if pods and pods[0].status.phase == "Running" else None
    return wait_for(running, 300, interval=1, what=f"{cluster}'s reaper running")


def kept(core, batch, ns: str, cluster: str, *jobs: str) -> None:
    """The PVCs and the Jobs stay."""
    pvcs = {p.metadata.name for p in core.list_namespaced_persistent_volume_claim(ns).items}
    assert {f"{cluster}-data", f"{cluster}-logs"} <= pvcs, pvcs
    for job in jobs:
        assert batch.read_namespaced_job(job, ns)


def test_plain_helm_install_with_the_defaults_and_a_script_is_reaped(namespace, core, api_client):
    """Nothing but `helm install` of the chart's defaults with a script: no reaper value, no
    tfhelm command, no image to build."""
    values = {"code": {"source": "inline", "script": "ps_between_graph.py",
                       "inline": (EXAMPLES / "ps_between_graph.py").read_text(),
                       "extraFiles": {"tfhelm_example.py": (EXAMPLES / "tfhelm_example.py").read_text()},
                       "args": ["--steps", "30", "--checkpoint-every", "10"]}}
    timeline = Timeline(api_client, namespace, "plain").start()
    run("helm", "install", "plain", str(chart_path()), "-n", namespace, "-f", "-", stdin=yaml.safe_dump(values))
    timeline.reaped(core)
    kept(core, client.BatchV1Api(api_client), namespace, "plain", job_of(namespace, "plain", "worker"))


def test_tfhelm_up_without_reap_is_reaped(namespace, core, api_client):
    timeline = Timeline(api_client, namespace, "upr").start()
    run("tfhelm", "up", "--name", "upr", "-n", namespace, "--workers", "2", "--ps", "1",
        "--script", "examples/ps_between_graph.py", "--", "--steps", "30", "--checkpoint-every", "10")
    timeline.reaped(core)
    kept(core, client.BatchV1Api(api_client), namespace, "upr", job_of(namespace, "upr", "worker"))
    status = run("tfhelm", "status", "upr", "-n", namespace).stdout
    assert "TFClusterReaped" in status, status


def test_an_in_graph_cluster_with_an_evaluator_loses_its_ps_and_worker_servers(namespace, core, api_client):
    """The chief decides; the worker servers' Job is suspended (its pods go, the Job stays),
    the PS go; the evaluator and the chief ran to their end."""
    batch = client.BatchV1Api(api_client)
    timeline = Timeline(api_client, namespace, "ige", deciding="chief").start()
    run("tfhelm", "up", "--name", "ige", "-n", namespace, "--chief", "--in-graph", "--evaluator", "--workers", "2",
        "--ps", "1", "--script", "examples/ps_in_graph.py", "--", "--steps", "30", "--checkpoint-every", "10")
    timeline.reaped(core)
    workers = job_of(namespace, "ige", "worker")
    assert batch.read_namespaced_job(workers, namespace).spec.suspend is True
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector=f"job-name={workers}").items, 120,
             interval=1, what="the worker servers gone")
    assert f"suspended Job {workers}" in timeline.events["TFClusterReaped"].message
    kept(core, batch, namespace, "ige", workers, job_of(namespace, "ige", "chief"), job_of(namespace, "ige", "evaluator"))
    logs = pod_logs(core, namespace, "tfhelm.io/cluster=ige,app.kubernetes.io/component=chief")
    assert any("trained steps" in text for text in logs.values()), logs
