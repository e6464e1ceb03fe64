"""Two trainings, one ClusterQueue that holds one of them (issue #32's scenario, for real):
training A (`tfhelm up --queue`) runs, training B (plain `helm install --set queue.name=...`)
waits as a whole, without a pod; one of A's workers is deleted and A's replacement runs before
any pod of B exists; both complete in turn, and at no moment did a waiting cluster hold a node."""

from __future__ import annotations

import yaml
from kubernetes import client

from tests.cluster.conftest import job_of
from tests.cluster.test_localcluster import job_condition
from tests.tf.helpers import events, metrics
from tfhelm.chart import chart_path

from .conftest import (EXAMPLES, SMALL, TASK_ROLES, check_no_queued_cluster_holds_a_node, cluster_queue, local_queue,
                       pod_logs, run, unique, volume_dir, wait_for)

# 4 collective workers of 700m: one training fits the ClusterQueue's 3 CPU, two do not.
WORKERS, CPU, QUOTA = 4, "700m", "3"
STEPS = ["--", "--steps", "200", "--checkpoint-every", "20"]
# A trains long enough to be still training when its worker is deleted (only B's install comes
# first, the status checks after): 1,000 steps took ~50 s on an idle machine, B's install ~3 s.
STEPS_A = ["--", "--steps", "2000", "--checkpoint-every", "20"]


def inline_collective(name: str, queue: str) -> dict:
    """The values a plain Helm user writes: the collective example inline, queued."""
    return {"clusterName": name, "worker": {"replicas": WORKERS, "resources": {"requests": {"cpu": CPU}}},
            "ps": {"replicas": 0}, "queue": {"name": queue},
            "code": {"source": "inline", "script": "collective.py", "inline": (EXAMPLES / "collective.py").read_text(),
                     "extraFiles": {"tfhelm_example.py": (EXAMPLES / "tfhelm_example.py").read_text()},
                     "args": STEPS[1:]}}


def worker_pods(core, ns: str, cluster: str) -> list:
    return core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster={cluster},tfhelm.io/role=worker").items


def test_a_waiting_cluster_holds_no_node_and_the_running_one_keeps_its_quota(
        namespace, core, api_client, nodes, objects, recorder, training_cpu):
    batch = client.BatchV1Api(api_client)
    cq = unique("t-admission")
    objects(cluster_queue(cq, QUOTA), local_queue(namespace, cq))
    run("tfhelm", "up", "--name", "a", "-n", namespace, "--workers", str(WORKERS), "--ps", "0", "--queue", "team",
        "--script", "examples/collective.py", "--set", f"worker.resources.requests.cpu={CPU}", *SMALL, *STEPS_A)
    logs_a = volume_dir(core, namespace, "a-logs") / "a"
    wait_for(lambda: events(metrics(logs_a, "worker-0"), "step"), 600, interval=0.5, what="A training")

    # B, with Helm alone, waits as a whole: its Job is suspended, it has no pod at all.
    run("helm", "install", "b", str(chart_path()), "-n", namespace, "-f", "-", *SMALL,
        stdin=yaml.safe_dump(inline_collective("b", "team")))
    workers_b = job_of(namespace, "b", "worker")
    assert batch.read_namespaced_job(workers_b, namespace).spec.suspend

    # One of A's workers goes: the Job replaces it within A's quota, before B may start.
    victim = next(p for p in worker_pods(core, namespace, "a") if p.status.phase == "Running")
    assert not job_condition(batch, namespace, job_of(namespace, "a", "worker")), "A still trains"
    core.delete_namespaced_pod(victim.metadata.name, namespace)
    index = victim.metadata.annotations["batch.kubernetes.io/job-completion-index"]

    def replacement_running():
        return next((p for p in worker_pods(core, namespace, "a") if p.metadata.name != victim.metadata.name
                     and p.metadata.annotations["batch.kubernetes.io/job-completion-index"] == index
                     and p.status.phase == "Running"), None)
    try:
        replacement = wait_for(replacement_running, 300, what="A's replacement worker running")
    except TimeoutError:
        pods = [(p.metadata.name, p.metadata.annotations.get("batch.kubernetes.io/job-completion-index"),
                 p.status.phase, p.spec.node_name, p.spec.scheduling_gates,
                 [(c.type, c.status, c.reason) for c in p.status.conditions or []])
                for p in worker_pods(core, namespace, "a")]
        job = batch.read_namespaced_job(job_of(namespace, "a", "worker"), namespace)
        raise AssertionError(f"no replacement of index {index} runs: pods {pods}; Job suspend={job.spec.suspend} "
                             f"status={job.status}") from None
    assert not worker_pods(core, namespace, "b"), "B started a pod before A's replacement ran"
    status = run("tfhelm", "status", "b", "-n", namespace).stdout
    assert "queue: Queued: waiting in LocalQueue team" in status, status
    assert f"waiting for cpu in ClusterQueue {cq}" in status and "of 3 in use" in status and "more needed" in status, status
    assert " Queued " in run("tfhelm", "list", "-n", namespace).stdout

    workers_a = job_of(namespace, "a", "worker")
    for cluster, job in (("a", workers_a), ("b", workers_b)):
        assert wait_for(lambda: job_condition(batch, namespace, job), 900, interval=2,
                        what=f"training {cluster} to finish") == "Complete", pod_logs(core, namespace, f"tfhelm.io/cluster={cluster}")
    assert events(metrics(volume_dir(core, namespace, "b-logs") / "b", "worker-0"), "done")

    run_events = recorder.snapshot()
    first_b_pod = min(e.rv for e in run_events if e.kind == "Pod" and e.cluster == f"{namespace}/b"
                      and e.obj["metadata"]["labels"].get("tfhelm.io/role") in TASK_ROLES)  # not its reaper
    running_again = min(e.rv for e in run_events if e.kind == "Pod" and e.obj["metadata"]["uid"] == replacement.metadata.uid
                        and (e.obj.get("status") or {}).get("phase") == "Running")
    assert running_again < first_b_pod, "A's replacement ran before any pod of B existed"
    a_done = min(e.rv for e in run_events if e.kind == "Job" and e.cluster == f"{namespace}/a"
                 and any(c["type"] in ("Complete", "SuccessCriteriaMet") and c["status"] == "True"
                         for c in (e.obj.get("status") or {}).get("conditions") or []))
    assert a_done < first_b_pod, "B's pods came only once A had finished (and freed its quota)"
    seen = check_no_queued_cluster_holds_a_node(run_events, training_cpu)
    assert seen[f"{namespace}/a"]["bound"] > WORKERS and seen[f"{namespace}/b"]["bound"] >= WORKERS, seen
