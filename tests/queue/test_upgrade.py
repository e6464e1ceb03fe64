"""A queued cluster under Helm: an upgrade never fights Kueue over `spec.suspend` (the chart
never renders it), waiting or admitted; bad queue input is refused before anything is made."""

from __future__ import annotations

from kubernetes import client

from tests.cluster.conftest import job_of
from tfhelm.chart import chart_path

from .conftest import SMALL, cluster_queue, local_queue, run, unique, wait_for

QUEUED = ["--set", "queue.name=team", "--set", "ps.replicas=1", "--set", "worker.replicas=1",
          "--set-json", 'worker.command=["sleep","900"]', *SMALL]


def test_helm_upgrades_leave_suspend_to_kueue(namespace, core, api_client, nodes, objects):
    batch = client.BatchV1Api(api_client)
    cq = unique("t-upgrade")
    objects(cluster_queue(cq, "0"), local_queue(namespace, cq))  # no quota: it waits for ever
    install = ["helm", "upgrade", "--install", "q", str(chart_path()), "-n", namespace, *QUEUED]
    run(*install)
    workers = job_of(namespace, "q", "worker")
    assert batch.read_namespaced_job(workers, namespace).spec.suspend
    ps = wait_for(lambda: core.list_namespaced_pod(namespace, label_selector="tfhelm.io/cluster=q,tfhelm.io/role=ps").items,
                  120, what="the PS pod (gated)")
    run(*install)  # the same values again: Helm applies every object, the Job included
    run(*install)
    assert batch.read_namespaced_job(workers, namespace).spec.suspend, "an upgrade unsuspended a waiting Job"
    assert not core.list_namespaced_pod(namespace, label_selector="tfhelm.io/cluster=q,tfhelm.io/role=worker").items
    assert not core.read_namespaced_pod(ps[0].metadata.name, namespace).spec.node_name

    objects(cluster_queue(cq, "2"))  # quota arrives: Kueue admits it, the gate opens
    wait_for(lambda: not batch.read_namespaced_job(workers, namespace).spec.suspend, 120, what="Kueue to admit it")
    wait_for(lambda: {p.metadata.labels["tfhelm.io/role"] for p in core.list_namespaced_pod(
        namespace, label_selector="tfhelm.io/cluster=q").items if p.status.phase == "Running"} >= {"ps", "worker"},
        300, what="PS and worker both running")
    before = {p.metadata.uid for p in core.list_namespaced_pod(namespace, label_selector="tfhelm.io/cluster=q").items}
    run(*install)
    assert not batch.read_namespaced_job(workers, namespace).spec.suspend, "an upgrade suspended an admitted Job"
    after = {p.metadata.uid for p in core.list_namespaced_pod(namespace, label_selector="tfhelm.io/cluster=q").items}
    assert before <= after, "an upgrade of an admitted cluster restarted its tasks"


def test_a_queue_that_is_not_there_is_refused_before_anything_is_made(namespace, api_client, kueue):
    out = run("tfhelm", "up", "--name", "nq", "-n", namespace, "--queue", "missing", code=2)
    assert f"no Kueue LocalQueue 'missing' in namespace {namespace}" in out.stderr, out.stderr
    assert not client.BatchV1Api(api_client).list_namespaced_job(namespace).items
    assert not run("helm", "list", "-n", namespace, "-q").stdout.strip()
