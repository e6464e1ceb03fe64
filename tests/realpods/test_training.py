"""The chart's own pods train for real on the local cluster's training nodes: TensorFlow in
containers, TF_CONFIG through cluster DNS, gRPC between PS and workers pinned to different
nodes, checkpoints on the volumes, resumes after killed pods, and the in-cluster reaper (in
the tasks' image) removing the parameter servers."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client

from tfhelm.chart import chart_path
from tests.tf.helpers import events, latest_checkpoint_step, metrics

from tests.cluster.conftest import job_of
from tests.cluster.test_localcluster import job_condition

from .conftest import TASKS, pod_logs, run, volume_dir, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = ["--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi"]


def cluster_pods(core, ns: str, name: str) -> list:
    """The TF tasks' pods (not the in-cluster reaper's)."""
    return core.list_namespaced_pod(
        ns, label_selector=f"tfhelm.io/cluster={name},{TASKS}").items


def placement(core, ns: str, name: str) -> dict[str, set[str]]:
    """The nodes each role of a TF cluster ran on."""
    found: dict[str, set[str]] = {}
    for p in cluster_pods(core, ns, name):
        found.setdefault(p.metadata.labels["app.kubernetes.io/component"], set()).add(p.spec.node_name)
    return found


def test_plain_helm_install_trains_between_graph_and_the_in_cluster_reaper_removes_the_ps(
        namespace, core, api_client, nodes):
    """`helm install` alone (the chart is complete): 2 workers and 1 PS train the
    between-graph example, the PS on one training node and the workers on the other; the
    reaper Deployment (in the tasks' image) removes nothing but the PS once the workers'
    Job completed."""
    batch, apps = client.BatchV1Api(api_client), client.AppsV1Api(api_client)
    script = (EXAMPLES / "ps_between_graph.py").read_text()
    values = {"worker": {"replicas": 2}, "ps": {"replicas": 1},
              "code": {"source": "inline", "script": "ps_between_graph.py", "inline": script,
                       "extraFiles": {"tfhelm_example.py": (EXAMPLES / "tfhelm_example.py").read_text()},
                       "args": ["--steps", "60", "--checkpoint-every", "20"]},
              "reaper": {"enabled": True, "grace": 1}}
    ps_node, worker_node = nodes.training
    run("helm", "install", "bg", str(chart_path()), "-n", namespace, "-f", "-", *SMALL,
        *nodes.pin("ps", ps_node), *nodes.pin("worker", worker_node), stdin=yaml.safe_dump(values))
    workers = job_of(namespace, "bg", "worker")  # named by the cluster's generation
    # Where the pods run, read once all are scheduled: the reaper (grace 1 s) may have removed
    # the PS by the time the Job's completion is seen.
    where = wait_for(lambda: (w := placement(core, namespace, "bg")).keys() >= {"ps", "worker"}
                     and None not in w["ps"] | w["worker"] and w, 300, what="the PS and workers scheduled")
    assert wait_for(lambda: job_condition(batch, namespace, workers), 600, interval=2,
                    what="the worker Job to finish") == "Complete", pod_logs(core, namespace, "tfhelm.io/cluster=bg")
    logs = pod_logs(core, namespace, "app.kubernetes.io/component=worker")
    assert any("loss" in text for text in logs.values()), logs
    # every worker's gRPC to the PS crossed nodes
    assert where["ps"] == {ps_node} and where["worker"] == {worker_node}, where
    logs_dir = volume_dir(core, namespace, "bg-logs") / "bg"
    assert latest_checkpoint_step(logs_dir / "checkpoints") >= 60
    assert events(metrics(logs_dir, "worker-0"), "done")
    # The reaper, running in the cluster, removed the PS and only them.
    wait_for(lambda: not apps.list_namespaced_deployment(
        namespace, label_selector="app.kubernetes.io/component=ps").items, 180, interval=1,
        what="the reaper to remove the PS Deployment")
    assert batch.read_namespaced_job(workers, namespace)
    assert core.read_namespaced_persistent_volume_claim("bg-logs", namespace)


def test_in_graph_checkpoints_from_the_ps_and_resumes_after_killed_tasks(namespace, core, api_client, nodes):
    """ParameterServerStrategy across nodes (the chief and the PS on one training node, the
    workers on the other): each PS writes its shard of the checkpoint to the logs volume.
    The chief crashes right after its first checkpoint and a worker pod is deleted
    mid-training; the restarted chief restores the checkpoint and finishes."""
    batch = client.BatchV1Api(api_client)
    ps_node, worker_node = nodes.training
    run("tfhelm", "up", "--name", "ig", "-n", namespace, "--chief", "--in-graph", "--workers", "2", "--ps", "1",
        "--script", "examples/ps_in_graph.py", *SMALL, "--set", "chief.backoffLimitPerIndex=2",
        "--set", "failurePolicy.mode=retryAll",  # the example's crash is exit 3, which fails fast by default
        *nodes.pin("ps", ps_node), *nodes.pin("chief", ps_node), *nodes.pin("worker", worker_node),
        "--", "--steps", "3000", "--checkpoint-every", "100", "--crash-after-checkpoint", "100")
    logs_dir = volume_dir(core, namespace, "ig-logs") / "ig"
    wait_for(lambda: len(events(metrics(logs_dir, "chief-0"), "start")) == 2, 600, interval=0.5,
             what="the chief restarted after its crash")
    worker = next(p for p in cluster_pods(core, namespace, "ig")
                  if p.metadata.labels["app.kubernetes.io/component"] == "worker")
    core.delete_namespaced_pod(worker.metadata.name, namespace)
    chief = job_of(namespace, "ig", "chief")
    assert wait_for(lambda: job_condition(batch, namespace, chief), 600, interval=2,
                    what="the chief Job to finish") == "Complete", pod_logs(core, namespace, "tfhelm.io/cluster=ig")
    starts = events(metrics(logs_dir, "chief-0"), "start")
    assert len(starts) == 2 and starts[0]["step"] == 0 and starts[1]["step"] >= 100, starts
    assert starts[1]["restored"]
    assert latest_checkpoint_step(logs_dir / "checkpoints") >= 3000
    where = placement(core, namespace, "ig")
    assert where == {"chief": {ps_node}, "ps": {ps_node}, "worker": {worker_node}}, where


def test_collective_workers_train_in_lockstep(namespace, core, api_client, nodes):
    """MultiWorkerMirroredStrategy, one worker on each training node: every step's
    all-reduce crosses the nodes."""
    batch = client.BatchV1Api(api_client)
    run("tfhelm", "up", "--name", "mw", "-n", namespace, "--workers", "2", "--ps", "0",
        "--script", "examples/collective.py", *SMALL, *nodes.spread("worker", "mw"),
        "--", "--steps", "40", "--checkpoint-every", "20")
    workers = job_of(namespace, "mw", "worker")
    assert wait_for(lambda: job_condition(batch, namespace, workers), 600, interval=2,
                    what="the worker Job to finish") == "Complete", pod_logs(core, namespace, "tfhelm.io/cluster=mw")
    logs_dir = volume_dir(core, namespace, "mw-logs") / "mw"
    done = [events(metrics(logs_dir, f"worker-{i}"), "done") for i in (0, 1)]
    assert all(done), done
    assert latest_checkpoint_step(logs_dir / "checkpoints") >= 40
    workers = [p.spec.node_name for p in cluster_pods(core, namespace, "mw")]
    assert sorted(workers) == sorted(nodes.training), workers


def test_a_killed_ps_is_replaced_and_training_resumes_from_its_checkpoint(namespace, core, nodes):
    """Between-graph, the PS and the workers on different nodes: the PS pod is deleted
    mid-training. Its Deployment starts a new one (with empty variables); the workers
    fail, their Job restarts them, and the chief restores the checkpoint into the new PS;
    `tfhelm reap` then reaps."""
    ps_node, worker_node = nodes.training
    run("tfhelm", "up", "--name", "kp", "-n", namespace, "--workers", "2", "--ps", "1",
        "--script", "examples/ps_between_graph.py", *SMALL, "--set", "worker.backoffLimitPerIndex=3",
        *nodes.pin("ps", ps_node), *nodes.pin("worker", worker_node),
        "--", "--steps", "3000", "--checkpoint-every", "100")
    logs_dir = volume_dir(core, namespace, "kp-logs") / "kp"
    # (CheckpointSaverHook also saves at the start: wait for one made by training.)
    wait_for(lambda: [e for e in events(metrics(logs_dir, "worker-0"), "checkpoint") if e["step"] >= 100],
             600, interval=0.5, what="a checkpoint at step 100 or later")
    ps = next(p for p in cluster_pods(core, namespace, "kp")
              if p.metadata.labels["app.kubernetes.io/component"] == "ps")
    core.delete_namespaced_pod(ps.metadata.name, namespace, grace_period_seconds=0)
    result = run("tfhelm", "reap", "kp", "-n", namespace, "--grace", "1", timeout=900)
    assert "reaped" in (result.stdout + result.stderr).lower()
    starts = events(metrics(logs_dir, "worker-0"), "start")
    assert len(starts) >= 2 and starts[-1]["step"] >= 100, starts
    assert latest_checkpoint_step(logs_dir / "checkpoints") >= 3000
    assert not [p for p in cluster_pods(core, namespace, "kp")
                if p.metadata.labels["app.kubernetes.io/component"] == "ps"
                and p.metadata.deletion_timestamp is None and p.status.phase == "Running"]
