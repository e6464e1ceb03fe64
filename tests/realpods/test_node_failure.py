"""Trainings that outlive a failing node, on the real nodes, with the chart's defaults
(`nodeFailure`, docs/nodes.md):

* a worker's node is lost (its link cut and everything on it frozen, as a hung machine)
  under two trainings at once, a collective one (MultiWorkerMirroredStrategy) and a
  between-graph PS one: Kubernetes evicts their tasks there, the in-cluster reaper removes
  the pods no kubelet will finish, their Jobs start them on the other node, both trainings
  resume from their last checkpoint and complete. The node then thaws while they still
  run: its old tasks stop at once (the launcher's fence) and write nothing more.
* a training node is drained (`kubectl drain`) under an in-graph training: every task moves,
  the drain returns, the chief saves on SIGTERM (tfhelm_preemption) and its restart resumes
  at that very step, the training completes.

Waits are for events (a pod Running elsewhere, a step line, a Job's condition), never for time.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from kubernetes import client

from tests.tf.helpers import events, latest_checkpoint_step, metrics
from tfhelm_dev import localcluster, localnode

from .conftest import TASKS, run, volume_dir, wait_for
from .test_nodes import SMALL, pod_cgroups, ready


def prefer(node: str) -> dict:
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}


def spread(cluster: str) -> dict:
    """Soft: one worker per node while both nodes take them, both on one when one is lost."""
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"tfhelm.io/cluster": cluster, "app.kubernetes.io/component": "worker"}},
        "topologyKey": "kubernetes.io/hostname"}}]}


def pods(core, ns: str, cluster: str, role: str) -> list:
    return core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster={cluster},tfhelm.io/role={role}").items


def job(batch, ns: str, cluster: str, role: str = "worker"):
    (j,) = [j for j in batch.list_namespaced_job(ns, label_selector=f"tfhelm.io/cluster={cluster}").items
            if j.metadata.labels["tfhelm.io/role"] == role]
    return j


def condition(obj, kind: str):
    return next((c for c in obj.status.conditions or [] if c.type == kind and c.status == "True"), None)


def index(pod) -> str:
    return pod.metadata.annotations["batch.kubernetes.io/job-completion-index"]


def since(t0: float, moment) -> str:
    return f"{moment.timestamp() - t0:.0f} s" if moment else "-"


def node_log(node: localnode.Node, pod) -> Path:
    """The kubelet's file of a pod's task container on the node (podLogsDir)."""
    return node.state / "pods-logs" / f"{pod.metadata.namespace}_{pod.metadata.name}_{pod.metadata.uid}" \
        / "tensorflow" / "0.log"


def test_trainings_outlive_a_lost_worker_node_and_its_thaw_leaves_no_second_task(
        namespace, core, nodes, external_cluster):
    if external_cluster:
        pytest.skip("loses a node of the local cluster")
    keep, lose = nodes.training
    lost = localcluster.real_node(lose)
    batch = client.BatchV1Api(core.api_client)
    trainings = {  # cluster -> (script, options)
        "col": ("examples/collective.py", ["--workers", "2", "--ps", "0"]),
        "psc": ("examples/ps_between_graph.py", ["--workers", "2", "--ps", "1", "--set-json",
                                                 f"ps.affinity={json.dumps({'nodeAffinity': prefer(keep)})}"]),
    }
    for name, (script, options) in trainings.items():
        run("tfhelm", "up", "--name", name, "-n", namespace, "--script", script, *options, *SMALL,
            "--set", "worker.backoffLimitPerIndex=6",
            "--set-json", f"worker.affinity={json.dumps({'podAntiAffinity': spread(name)})}",
            "--", "--steps", "1500", "--checkpoint-every", "50")
    logs = {name: volume_dir(core, namespace, f"{name}-logs") / name for name in trainings}

    def checkpointed(name: str) -> int:
        return max([e["step"] for e in events(metrics(logs[name], "worker-0"), "step" if name == "col" else
                                               "checkpoint")] or [0])
    wait_for(lambda: all(checkpointed(n) >= 50 for n in trainings), 900, interval=0.5,
             what="a checkpoint at step 50 in both trainings")
    old = {}
    for name in trainings:
        workers = pods(core, namespace, name, "worker")
        assert sorted(p.spec.node_name for p in workers) == sorted(nodes.training), \
            f"{name}: its workers did not spread over both nodes ({[p.spec.node_name for p in workers]})"
        (old[name],) = [p for p in workers if p.spec.node_name == lose]
    assert all(p.spec.node_name == keep for p in pods(core, namespace, "psc", "ps"))

    lost_at = time.time()
    localnode.lose(lost)
    thawed_at = None
    try:
        not_ready = wait_for(lambda: next((c for c in core.read_node(lose).status.conditions
                                           if c.type == "Ready" and c.status == "Unknown"), None),
                             180, interval=1, what=f"{lose} to be NotReady (no heartbeat)")

        def replacement(name: str):
            return next((p for p in pods(core, namespace, name, "worker") if index(p) == index(old[name])
                         and p.metadata.uid != old[name].metadata.uid and p.status.phase == "Running"), None)
        new = {name: wait_for(lambda n=name: replacement(n), 600, interval=1,
                              what=f"{name}'s lost worker started again on {keep}") for name in trainings}
        assert all(p.spec.node_name == keep for p in new.values())
        # The old pods are gone from the API: the reaper removed what no kubelet would finish.
        for name in trainings:
            assert old[name].metadata.uid not in {p.metadata.uid for p in pods(core, namespace, name, "worker")}
        # The node comes back while the collective training still runs: its old tasks must not.
        assert not condition(job(batch, namespace, "col"), "Complete")
        localnode.restore(lost)
        thawed_at = time.time()
        fenced = {name: wait_for(lambda n=name: node_log(lost, old[n]).exists() and "runs this task now" in
                                 node_log(lost, old[n]).read_text(), 60, interval=0.2,
                                 what=f"{name}'s old worker to stop (the launcher's fence)") for name in trainings}
        assert all(fenced.values())
    finally:
        if thawed_at is None:
            localnode.restore(lost)
    done = {name: wait_for(lambda n=name: condition(job(batch, namespace, n), "Complete"), 900, interval=1,
                           what=f"training {name} complete") for name in trainings}

    for name in trainings:
        lines = [e for t in ("worker-0", "worker-1") for e in metrics(logs[name], t)]
        after = [e for e in lines if e.get("pod") == old[name].metadata.uid and e["time"] >= thawed_at]
        assert not after, f"{name}: the thawed old worker still trained: {after}"
        restarts = [e for e in events(lines, "start") if e["time"] > lost_at]
        assert restarts and min(e["step"] for e in restarts) >= 50, f"{name} did not resume: {restarts}"
        assert latest_checkpoint_step(logs[name] / "checkpoints") >= 1500
        # Its first start (a between-graph worker's session may start again within the pod).
        resumed = min((e for e in events(lines, "start") if e.get("pod") == new[name].metadata.uid),
                      key=lambda e: e["time"])
        print(f"{name}: worker {index(old[name])} lost; {since(lost_at, not_ready.last_transition_time)} NotReady, "
              f"{new[name].metadata.creation_timestamp.timestamp() - lost_at:.0f} s a new pod on {keep}, "
              f"{resumed['time'] - lost_at:.0f} s its script resumed at step {resumed['step']}, "
              f"{since(lost_at, done[name].last_transition_time)} training complete")

    # Back: Ready and untainted, and nothing of the old tasks left on it.
    wait_for(lambda: ready(n := core.read_node(lose)) == "True" and not any(
        t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or []), 180, interval=1,
        what=f"{lose} to rejoin")
    for name in trainings:
        wait_for(lambda n=name: not pod_cgroups(lose, old[n].metadata.uid), 120, interval=1,
                 what=f"{name}'s old worker's containers to be gone from {lose}")


def test_a_drained_node_moves_every_task_the_drain_returns_and_the_chief_resumes_where_it_saved(
        namespace, core, nodes, external_cluster):
    if external_cluster:
        pytest.skip("drains a node of the local cluster")
    drained, other = nodes.training
    batch = client.BatchV1Api(core.api_client)
    here = json.dumps({"nodeAffinity": prefer(drained)})
    run("tfhelm", "up", "--name", "dr", "-n", namespace, "--script", "examples/ps_in_graph.py", "--in-graph",
        "--chief", "--workers", "2", "--ps", "1", *SMALL, "--set-json", f"affinity={here}",
        "--", "--steps", "800", "--checkpoint-every", "100")
    logs = volume_dir(core, namespace, "dr-logs") / "dr"
    wait_for(lambda: [e for e in events(metrics(logs, "chief-0"), "step") if e["step"] >= 100], 900, interval=0.5,
             what="a checkpoint at step 100")
    before = core.list_namespaced_pod(namespace, label_selector=f"tfhelm.io/cluster=dr,{TASKS}").items
    assert {p.spec.node_name for p in before} == {drained}, [(p.metadata.name, p.spec.node_name) for p in before]

    # Returns (exit 0) once every pod left: the PodDisruptionBudget let the workers go in turn.
    # Only this training's pods: what other tests left on the node (their namespaces going, with
    # their own budgets) is not this test's subject.
    try:
        run("kubectl", "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=600s",
            "--pod-selector=tfhelm.io/cluster=dr", timeout=900)
    finally:
        subprocess.run(["kubectl", "uncordon", drained], capture_output=True)
    complete = wait_for(lambda: condition(job(batch, namespace, "dr", "chief"), "Complete"), 900, interval=1,
                        what="training dr complete")
    assert complete
    now = core.list_namespaced_pod(namespace, label_selector=f"tfhelm.io/cluster=dr,{TASKS}").items
    assert not [p for p in now if p.spec.node_name == drained and p.status.phase in ("Running", "Pending")]
    lines = metrics(logs, "chief-0")
    (preempted,) = events(lines, "preempted")
    resumed = [e for e in events(lines, "start") if e["time"] > preempted["time"]]
    assert resumed and resumed[0]["step"] == preempted["step"], (preempted, resumed)
    assert latest_checkpoint_step(logs / "checkpoints") >= 800
    print(f"drain: the chief saved at step {preempted['step']} on SIGTERM and resumed there")
