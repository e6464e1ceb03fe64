"""The real nodes as users rely on them: training pods never land on the tainted user node,
and a training survives losing the node of its parameter server (it is replaced on the other
training node and the training resumes from its last checkpoint); the lost node comes back
and rejoins with nothing of the old pods left on it."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from kubernetes import client

from tests.tf.helpers import events, latest_checkpoint_step, metrics
from tfhelm_dev import localcluster, localnode

from tests.cluster.conftest import job_of

from .conftest import run, volume_dir, wait_for

SMALL = ["--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi"]
RESTRICTED = client.V1SecurityContext(
    run_as_non_root=True, run_as_user=1000, allow_privilege_escalation=False,
    capabilities=client.V1Capabilities(drop=["ALL"]),
    seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))


def pod(name: str, node: str, tolerate_user_node: bool) -> client.V1Pod:
    tolerations = [client.V1Toleration(operator="Equal", **localcluster.USER_NODE_TAINT)] if tolerate_user_node else None
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(
        restart_policy="Never", automount_service_account_token=False, tolerations=tolerations,
        node_selector={"kubernetes.io/hostname": node},
        containers=[client.V1Container(name="main", image="tensorflow/tensorflow:2.21.0", command=["true"],
                                       security_context=RESTRICTED)]))


def test_a_pod_without_the_toleration_never_lands_on_the_user_node(namespace, core, nodes):
    """Even asked for the user node by name, a pod without the toleration is refused by the
    scheduler for an untolerated taint; the same pod with the toleration runs there."""
    core.create_namespaced_pod(namespace, pod("plain", nodes.user, tolerate_user_node=False))
    core.create_namespaced_pod(namespace, pod("tolerates", nodes.user, tolerate_user_node=True))

    def unschedulable():
        p = core.read_namespaced_pod("plain", namespace)
        return next((c for c in p.status.conditions or [] if c.type == "PodScheduled"
                     and c.status == "False" and c.reason == "Unschedulable"), None)
    refused = wait_for(unschedulable, 60, what="the scheduler to refuse pod plain")
    assert "untolerated taint" in refused.message, refused.message
    # Its twin differs only by the toleration, and runs there: the taint is what refused it.
    ran = wait_for(lambda: (p := core.read_namespaced_pod("tolerates", namespace)).status.phase == "Succeeded" and p,
                   300, what="pod tolerates to run")
    assert ran.spec.node_name == nodes.user
    assert not core.read_namespaced_pod("plain", namespace).spec.node_name


def ps_pods(core, ns: str, name: str) -> list:
    return core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster={name},app.kubernetes.io/component=ps").items


def ready(node) -> str:
    return next((c.status for c in node.status.conditions or [] if c.type == "Ready"), "Unknown")


def seconds_since(start: datetime, moment: datetime) -> str:
    return f"{(moment - start).total_seconds():.0f} s"


def pod_cgroups(node: str, uid: str) -> list[Path]:
    """The cgroups a pod's containers run in on a real node (cgroup v1 and v2 layouts)."""
    return [p for root in (Path("/sys/fs/cgroup/memory") / node, Path("/sys/fs/cgroup") / node)
            for p in root.glob(f"kubepods*/**/pod{uid}*")]


def test_a_training_survives_losing_the_node_of_its_parameter_server(namespace, core, nodes, external_cluster):
    """Between-graph, 2 workers on one training node and the PS on the other. That node is
    lost mid-training (its cable cut, kubelet, containerd and pods frozen, as a machine that
    hangs): it goes NotReady 40 s after its last heartbeat (the controller-manager's grace
    period), the PS is evicted 10 s later (the chart's `nodeFailure.unreachableSeconds`) and
    its Deployment starts a new one on the other training node; the workers' calls to the
    silent PS fail within the chart's gRPC keepalive (20 s), they reconnect, the chief
    restores the last checkpoint into the new PS and the training completes. The node then comes back, rejoins, and its kubelet removes
    what was left of the old PS."""
    if external_cluster:
        pytest.skip("loses a node of the local cluster")
    keep, lose = nodes.training
    lost = localcluster.real_node(lose)
    # The PS prefers the node to lose (its replacement can only go to the other one).
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [lose]}]}}]}}
    run("tfhelm", "up", "--name", "nl", "-n", namespace, "--workers", "2", "--ps", "1",
        "--script", "examples/ps_between_graph.py", *SMALL, "--set", "worker.backoffLimitPerIndex=3",
        *nodes.pin("worker", keep), "--set-json", f"ps.affinity={json.dumps(prefer)}",
        "--", "--steps", "1000", "--checkpoint-every", "100")
    logs_dir = volume_dir(core, namespace, "nl-logs") / "nl"
    wait_for(lambda: [e for e in events(metrics(logs_dir, "worker-0"), "checkpoint") if e["step"] >= 100],
             600, interval=0.5, what="a checkpoint at step 100 or later")
    [old_ps] = ps_pods(core, namespace, "nl")
    assert old_ps.spec.node_name == lose, old_ps.spec.node_name
    assert pod_cgroups(lose, old_ps.metadata.uid)  # where its containers run, until the end

    lost_at = datetime.now(timezone.utc)
    localnode.lose(lost)
    try:
        not_ready = wait_for(lambda: next((c for c in core.read_node(lose).status.conditions
                                           if c.type == "Ready" and c.status == "Unknown"), None),
                             120, interval=1, what=f"{lose} to be NotReady (no heartbeat)")

        def replaced():
            return [p for p in ps_pods(core, namespace, "nl") if p.metadata.uid != old_ps.metadata.uid
                    and p.status.phase == "Running"]
        [new_ps] = wait_for(replaced, 180, interval=1, what="the PS replaced on another node")
        assert new_ps.spec.node_name == keep
        result = run("tfhelm", "reap", "nl", "-n", namespace, "--grace", "1", timeout=900)
        assert "reaped" in (result.stdout + result.stderr).lower()
        done = client.BatchV1Api(core.api_client).read_namespaced_job(job_of(namespace, "nl", "worker"), namespace)
        print(f"node lost; after {seconds_since(lost_at, not_ready.last_transition_time)} NotReady, "
              f"{seconds_since(lost_at, new_ps.metadata.creation_timestamp)} PS replaced, "
              f"{seconds_since(lost_at, done.status.completion_time)} training complete")
    finally:
        localnode.restore(lost)
    starts = events(metrics(logs_dir, "worker-0"), "start")
    assert len(starts) >= 2 and starts[-1]["step"] >= 100, starts  # resumed, not restarted from 0
    assert latest_checkpoint_step(logs_dir / "checkpoints") >= 1000

    # Back: Ready and schedulable again, and its kubelet removed the old PS's containers.
    wait_for(lambda: ready(n := core.read_node(lose)) == "True" and not any(
        t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or []), 180, interval=1,
        what=f"{lose} to rejoin")
    wait_for(lambda: old_ps.metadata.uid not in {p.metadata.uid for p in ps_pods(core, namespace, "nl")},
             180, interval=1, what="the old PS pod to be gone")
    wait_for(lambda: not pod_cgroups(lose, old_ps.metadata.uid), 60, interval=1,
             what="the old PS's containers to be gone from the node")
