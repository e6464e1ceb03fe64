"""Priorities that preempt and resume, for real: a low-priority in-graph PS training (chief,
PS, two worker servers, the in-cluster reaper) runs; a high-priority collective training
arrives and Kueue preempts the low one. Its tasks stop on SIGTERM, its PS and chief go back to
waiting at their gates, it is requeued, and once the high one is done it is admitted again and
its chief resumes from its checkpoint at a later step and completes. The reaper never took the
preempted cluster for a finished one."""

from __future__ import annotations

from kubernetes import client

from tests.cluster.conftest import job_of
from tests.cluster.test_localcluster import job_condition
from tests.tf.helpers import events, latest_checkpoint_step, metrics
from tfhelm import contract

from .conftest import (SMALL, check_no_queued_cluster_holds_a_node, cluster_queue, condition, local_queue, pod_logs,
                       priority_class, run, unique, volume_dir, wait_for, workload_of)

CPU, QUOTA = "900m", "2"  # two workers of either training fit the quota, four do not


def terminations(run_events, cluster: str) -> dict[str, tuple[int, str]]:
    """The exit code and termination message of each of a cluster's task containers that
    ended, by pod."""
    ended = {}
    for e in run_events:
        if e.kind == "Pod" and e.cluster == cluster:
            for cs in (e.obj.get("status") or {}).get("containerStatuses") or []:
                done = (cs.get("state") or {}).get("terminated")
                if cs["name"] == "tensorflow" and done:
                    ended[e.obj["metadata"]["name"]] = (done["exitCode"], (done.get("message") or "").strip())
    return ended


def test_a_high_priority_training_preempts_a_low_one_which_resumes_from_its_checkpoint(
        namespace, core, api_client, nodes, objects, recorder, training_cpu):
    batch, apps = client.BatchV1Api(api_client), client.AppsV1Api(api_client)
    cq, low, high = unique("t-preempt"), unique("low"), unique("high")
    objects(priority_class(low, 100), priority_class(high, 1000), cluster_queue(cq, QUOTA), local_queue(namespace, cq))
    run("tfhelm", "up", "--name", "lo", "-n", namespace, "--chief", "--in-graph", "--workers", "2", "--ps", "1",
        "--queue", "team", "--priority", low, "--script", "examples/ps_in_graph.py", *SMALL,
        "--set", f"worker.resources.requests.cpu={CPU}", "--set", "reaper.enabled=true", "--set", "reaper.grace=1",
        # The grace a loaded cluster needs (the PS serve on for a third of it while the chief
        # saves): with 30 s the chief was once killed mid-save on this 2-core machine.
        "--set", "nodeFailure.terminationGraceSeconds=90",
        "--", "--steps", "1500", "--checkpoint-every", "100")
    logs = volume_dir(core, namespace, "lo-logs") / "lo"
    wait_for(lambda: (latest_checkpoint_step(logs / "checkpoints") or 0) >= 100, 600, interval=0.5,
             what="the low-priority training's first checkpoint")
    lo_workers = job_of(namespace, "lo", "worker")
    lo_uid = batch.read_namespaced_job(lo_workers, namespace).metadata.uid

    run("tfhelm", "up", "--name", "hi", "-n", namespace, "--workers", "2", "--ps", "0", "--queue", "team",
        "--priority", high, "--script", "examples/collective.py", *SMALL, "--set", f"worker.resources.requests.cpu={CPU}",
        "--", "--steps", "40", "--checkpoint-every", "20")
    hi_workers = job_of(namespace, "hi", "worker")
    preempted = wait_for(lambda: condition(workload_of(api_client, namespace, lo_uid), "Preempted"), 300,
                         what="Kueue to preempt the low-priority training")
    assert preempted["reason"] == "InClusterQueue", preempted
    # Requeued, and said so: by whom, and that it waits again.
    wait_for(lambda: condition(workload_of(api_client, namespace, lo_uid), "Requeued"), 300,
             what="the low-priority training requeued")
    status = run("tfhelm", "status", "lo", "-n", namespace).stdout
    hi_uid = batch.read_namespaced_job(hi_workers, namespace).metadata.uid
    hi_workload = workload_of(api_client, namespace, hi_uid)["metadata"]["name"]
    assert f"preemption by {namespace}/{hi_workload}" in status, status
    assert "queue: Requeued" in status or "queue: Preempted" in status, status
    # Its PS wait at their gate (the reaper evicted them), not reaped: training is not done.
    assert apps.read_namespaced_deployment("lo-ps-0", namespace)
    wait_for(lambda: all(any(g.name == "tfhelm.io/workers-admitted" for g in p.spec.scheduling_gates or [])
                         for p in core.list_namespaced_pod(namespace, label_selector="tfhelm.io/cluster=lo,tfhelm.io/role in (ps,chief)").items
                         if not p.metadata.deletion_timestamp and p.status.phase not in ("Succeeded", "Failed")),
             300, what="the preempted cluster's PS and chief gated again")

    assert wait_for(lambda: job_condition(batch, namespace, hi_workers), 600, interval=2,
                    what="the high-priority training to finish") == "Complete", pod_logs(core, namespace, "tfhelm.io/cluster=hi")
    chief = job_of(namespace, "lo", "chief")
    assert wait_for(lambda: job_condition(batch, namespace, chief), 900, interval=2,
                    what="the low-priority training to finish") == "Complete", pod_logs(core, namespace, "tfhelm.io/cluster=lo")
    starts = events(metrics(logs, "chief-0"), "start")
    # Started at 0, then (after the preemption; a retried attempt may add a start) only ever from
    # a checkpoint at step 100 or later: no progress lost to the preemption.
    assert len(starts) >= 2 and starts[0]["step"] == 0, starts
    assert all(s["restored"] and s["step"] >= 100 for s in starts[1:]), starts
    assert latest_checkpoint_step(logs / "checkpoints") >= 1500
    # Reaped once done, not before: the PS go and the in-graph worker servers' Job is deleted.
    wait_for(lambda: not apps.list_namespaced_deployment(namespace, label_selector="tfhelm.io/cluster=lo,tfhelm.io/role=ps").items,
             180, what="the reaper to remove the PS")
    wait_for(lambda: not [j for j in batch.list_namespaced_job(namespace, label_selector="tfhelm.io/cluster=lo,tfhelm.io/role=worker").items
                          if not j.metadata.deletion_timestamp], 180, what="the reaper to delete the in-graph worker Job")

    run_events = recorder.snapshot()
    # The preempted tasks stopped on SIGTERM (exit 143), none was killed after its grace period
    # (137); the in-graph chief may see its worker servers go first and exit 75 (retry), as the
    # contract says a lost peer does, or save and leave (tests/tf/test_preemption.py).
    ended = terminations(run_events, f"{namespace}/lo")
    stopped = {code for code, _ in ended.values() if code != 0}
    assert 143 in stopped and stopped <= {143, contract.task("retryExitCode")}, ended
    reaped = [e for e in core.list_namespaced_event(namespace).items if e.reason == "TFClusterReaped"]
    assert len(reaped) == 1 and "training complete" in reaped[0].message, [e.message for e in reaped]
    seen = check_no_queued_cluster_holds_a_node(run_events, training_cpu)
    assert seen[f"{namespace}/lo"]["suspensions"] >= 1, seen
