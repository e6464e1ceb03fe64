"""Training done is decided from the pods, before the Job controller has said anything.

A worker Job with `spec.managedBy` set to a foreign controller: the built-in Job controller
ignores it, so the Job never gets a count, a SuccessCriteriaMet or a Complete. The test makes
the Job's pods itself, as the Job controller would (owned by the Job, the completion index
in an annotation), kwok runs and completes them, and the reaper, `up --wait`'s wait,
`tfhelm status` and `tfhelm list` must all see the training Complete from the pods alone.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading

from kubernetes import client
from rich.console import Console

from tfhelm.cluster import progress
from tfhelm.cluster.spec import Shape
from tfhelm.cluster.training import COMPLETION_INDEX
from tfhelm.kube import Kube

from .conftest import wait_for
from .test_reaper import COMPLETE_AFTER, first_line, ps_objects, start_reap

FOREIGN = "example.com/not-the-job-controller"
RESTRICTED = client.V1SecurityContext(run_as_non_root=True, run_as_user=1000, allow_privilege_escalation=False,
                                      capabilities=client.V1Capabilities(drop=["ALL"]),
                                      seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))


def labels(role: str) -> dict:
    return {"tfhelm.io/cluster": "m", "tfhelm.io/role": role, "helm.sh/chart": "tf-cluster-0.0.0"}


def pod_spec(restart: str = "Never") -> client.V1PodSpec:
    return client.V1PodSpec(restart_policy=restart, automount_service_account_token=False,
                            containers=[client.V1Container(name="tensorflow", image="tfhelm-test/none:0",
                                                           security_context=RESTRICTED)])


def foreign_job(batch, ns: str, workers: int) -> client.V1Job:
    return batch.create_namespaced_job(ns, client.V1Job(
        metadata=client.V1ObjectMeta(name="m-worker", labels=labels("worker")),
        spec=client.V1JobSpec(completions=workers, parallelism=workers, completion_mode="Indexed",
                              managed_by=FOREIGN, template=client.V1PodTemplateSpec(
                                  metadata=client.V1ObjectMeta(labels=labels("worker")), spec=pod_spec()))))


def task_pod(core, ns: str, job: client.V1Job, index: int) -> None:
    """A pod as the Job controller makes it; it runs until its delay is cut (kwok)."""
    core.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=f"m-worker-{index}", labels={**labels("worker"), COMPLETION_INDEX: str(index)},
            annotations={COMPLETION_INDEX: str(index), COMPLETE_AFTER: "1h"},
            owner_references=[client.V1OwnerReference(api_version="batch/v1", kind="Job", name=job.metadata.name,
                                                      uid=job.metadata.uid, controller=True)]),
        spec=pod_spec()))


def ps_deployment(apps, ns: str) -> None:
    sel = {"tfhelm.io/cluster": "m", "tfhelm.io/role": "ps"}
    apps.create_namespaced_deployment(ns, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="m-ps-0", labels=labels("ps")),
        spec=client.V1DeploymentSpec(replicas=1, selector=client.V1LabelSelector(match_labels=sel),
                                     template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=sel),
                                                                       spec=pod_spec("Always")))))


def tfhelm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfhelm", *args], capture_output=True, text=True, timeout=120)


def test_reaper_and_wait_decide_complete_from_the_pods(core, apps, namespace):
    batch = client.BatchV1Api(core.api_client)
    job = foreign_job(batch, namespace, workers=2)
    for i in range(2):
        task_pod(core, namespace, job, i)
    ps_deployment(apps, namespace)
    wait_for(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(
        namespace, label_selector="tfhelm.io/role=worker").items), 60, what="the task pods running")

    waited: dict = {}
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    waiter = threading.Thread(target=lambda: waited.update(result=progress.wait_for_training(
        Kube(), namespace, "m", Shape(workers=2), console, timeout=120)), daemon=True)
    waiter.start()
    reaper = start_reap(namespace, "m", "--grace", "0", "--delete-directly")
    first = first_line(reaper)  # it has listed the Jobs; pods that succeed before it lists them are in that list
    assert "worker 0/2 succeeded" in first, first

    for i in range(2):  # the tasks end (kwok re-reads the delay)
        core.patch_namespaced_pod(f"m-worker-{i}", namespace, {"metadata": {"annotations": {COMPLETE_AFTER: "100ms"}}})
    out = first + reaper.communicate(timeout=120)[0]
    assert reaper.returncode == 0, out
    assert "training complete" in out and "deleted Deployment m-ps-0" in out, out
    waiter.join(120)
    assert waited.get("result") == ("Complete", True), console.file.getvalue()
    assert console.file.getvalue().splitlines()[-1].endswith("worker tasks succeeded: 2/2")

    # Nobody but the pods said so: the Job controller never touched the Job.
    status = batch.read_namespaced_job("m-worker", namespace).status
    assert not status.conditions and not status.succeeded, status
    assert not ps_objects(core, apps, namespace, "m")
    shown = tfhelm("status", "m", "-n", namespace, "-o", "json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["training"] == "Complete", shown.stdout + shown.stderr
    listed = json.loads(tfhelm("list", "-n", namespace, "-o", "json").stdout)
    assert [(r["name"], r["workers"], r["training"]) for r in listed] == [("m", "2/2", "Complete")]
