"""Namespaces go away after every run shape (issue #31): after a between-graph run, an in-graph
run whose worker servers the reaper stopped, and a reaped run, deleting the namespace ends
with the namespace gone: no pod keeps the Job controller's `batch.kubernetes.io/job-tracking`
finalizer once its Job is gone."""

from __future__ import annotations

import re

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster.conftest import job_of
from tests.cluster.test_localcluster import job_condition

from .conftest import _exists, run, wait_for

TRACKING = "batch.kubernetes.io/job-tracking"
SMALL = ["--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi"]


def deleted_entirely(core, ns: str) -> None:
    """Delete the namespace and wait until it is gone; else say which pods hold it, and why."""
    core.delete_namespace(ns)

    def gone():
        return not _exists(lambda: core.read_namespace(ns))
    try:
        wait_for(gone, 180, interval=1, what=f"namespace {ns} deleted")
    except TimeoutError:
        held = [(p.metadata.name, p.status.phase, p.metadata.finalizers)
                for p in core.list_namespaced_pod(ns).items if p.metadata.finalizers]
        raise AssertionError(f"namespace {ns} still Terminating; pods with finalizers: {held}") from None


SHAPES = {
    # Between-graph: the workers finish; the PS serve on until the namespace goes.
    "between-graph": (["--workers", "2", "--ps", "1", "--script", "examples/ps_between_graph.py"],
                      ["--", "--steps", "20", "--checkpoint-every", "10"], "worker"),
    # In-graph: the chief drives worker servers that never exit; the reaper stops them (suspends
    # their Job: its pods end in Error) and removes the PS.
    "in-graph, reaped": (["--chief", "--in-graph", "--workers", "2", "--ps", "1", "--script",
                          "examples/ps_in_graph.py", "--set", "reaper.enabled=true", "--set", "reaper.grace=1"],
                         ["--", "--steps", "20", "--checkpoint-every", "10"], "chief"),
    # Between-graph with the in-cluster reaper: the PS are deleted once the workers finished.
    "between-graph, reaped": (["--workers", "2", "--ps", "1", "--script", "examples/ps_between_graph.py",
                               "--set", "reaper.enabled=true", "--set", "reaper.grace=1"],
                              ["--", "--steps", "20", "--checkpoint-every", "10"], "worker"),
}


# Deleted while running, as a test's namespace fixture or `tfhelm user remove --purge` does:
# `helm uninstall` first (the Jobs go in the background), or the namespace at once.
WHILE_RUNNING = {
    # In-graph servers a notebook drives (no chief): they never finish.
    "in-graph servers, namespace deleted": (["--in-graph", "--workers", "2", "--ps", "1"], False),
    # In-graph with a chief that finished: the worker servers serve on until removed.
    "in-graph, uninstalled then deleted": (["--chief", "--in-graph", "--workers", "2", "--ps", "1", "--script",
                                            "examples/ps_in_graph.py", "--", "--steps", "10"], True),
}


# Deleted while its worker Jobs run, the namespace goes only thanks to the in-cluster reaper:
# Kubernetes deletes the pods first and the Jobs after, and a Job with backoffLimitPerIndex keeps
# its tracking finalizer on an index's last failed pod until it can make the next one, which the
# terminating namespace refuses (tfhelm/reaper/lost.py, release_in_ending_namespace).
@pytest.mark.parametrize("shape", list(WHILE_RUNNING))
def test_the_namespace_goes_when_deleted_while_tasks_run(shape, namespace, core, nodes):
    options, uninstall = WHILE_RUNNING[shape]
    cut = options.index("--") if "--" in options else len(options)
    run("tfhelm", "up", "--name", "td", "-n", namespace, *options[:cut], *SMALL,
        *nodes.pin("ps", nodes.training[0]), *nodes.pin("worker", nodes.training[1]), *options[cut:])

    def serving():
        pods = core.list_namespaced_pod(namespace, label_selector="tfhelm.io/role=worker").items
        return len(pods) == 2 and all(p.status.phase == "Running" for p in pods)
    wait_for(serving, 300, interval=1, what="the worker servers running")
    if uninstall:
        run("helm", "uninstall", "td", "-n", namespace, "--wait=false")
    deleted_entirely(core, namespace)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_namespace_goes_after_a_run(shape, namespace, core, api_client, nodes):
    options, args, deciding = SHAPES[shape]
    batch, apps = client.BatchV1Api(api_client), client.AppsV1Api(api_client)
    run("tfhelm", "up", "--name", "td", "-n", namespace, *options, *SMALL,
        *nodes.pin("ps", nodes.training[0]), *nodes.pin("worker", nodes.training[1]), *args)
    job = job_of(namespace, "td", deciding)
    assert wait_for(lambda: job_condition(batch, namespace, job), 600, interval=2,
                    what=f"the {deciding} Job to finish") == "Complete"
    if "reaped" in shape:
        wait_for(lambda: not apps.list_namespaced_deployment(
            namespace, label_selector="tfhelm.io/role=ps").items, 180, interval=1, what="the reaper")
    if shape.startswith("in-graph"):
        worker = job_of(namespace, "td", "worker")
        wait_for(lambda: batch.read_namespaced_job(worker, namespace).spec.suspend, 120, interval=1,
                 what="the in-graph worker Job suspended")
        wait_for(lambda: all(p.status.phase in ("Succeeded", "Failed") for p in core.list_namespaced_pod(
            namespace, label_selector="tfhelm.io/role=worker").items), 120, interval=1,
                 what="the worker servers stopped")
    deleted_entirely(core, namespace)


# The Job controller's one try at releasing a deleted Job's pods, made to fail as a request that
# timed out would (kubernetes/kubernetes#141329): a policy refuses the release to anyone but
# tfhelm (its requests name their field manager).
REFUSE_RELEASE = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: NAME}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods]}]
  validations:
    - expression: >-
        !(has(oldObject.metadata.finalizers) && 'batch.kubernetes.io/job-tracking' in oldObject.metadata.finalizers)
        || (has(object.metadata.finalizers) && 'batch.kubernetes.io/job-tracking' in object.metadata.finalizers)
        || (has(request.options.fieldManager) && request.options.fieldManager == 'tfhelm')
      message: the test refuses the release of the Job controller's finalizer, as a timed-out request would
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: NAME}
spec:
  policyName: NAME
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: NAMESPACE}}}
"""


def test_tfhelm_down_releases_a_pod_the_job_controller_left_holding_its_finalizer(namespace, core, api_client,
                                                                                  nodes):
    """A stopped pod of a deleted Job whose release by the Job controller failed keeps its
    finalizer, and its namespace never finishes deleting (Kubernetes 1.36.3 does not try
    again). `tfhelm down` releases it."""
    import yaml

    admission, batch = client.AdmissionregistrationV1Api(api_client), client.BatchV1Api(api_client)
    name = f"refuse-release-{namespace}"[:63]
    policy, binding = yaml.safe_load_all(REFUSE_RELEASE.replace("NAMESPACE", namespace).replace("NAME", name))
    run("tfhelm", "up", "--name", "fz", "-n", namespace, "--in-graph", "--workers", "1", "--ps", "1", *SMALL,
        *nodes.pin("ps", nodes.training[0]), *nodes.pin("worker", nodes.training[1]))
    selector = "tfhelm.io/role=worker"

    def running():
        pods = [p for p in core.list_namespaced_pod(namespace, label_selector=selector).items
                if p.status.phase == "Running"]
        return pods[0].metadata.name if pods else None
    first = wait_for(running, 300, interval=1, what="the worker server running")
    admission.create_validating_admission_policy(policy)
    admission.create_validating_admission_policy_binding(binding)
    try:
        def refused() -> bool:
            try:
                core.patch_namespaced_pod(first, namespace, [{"op": "remove", "path": "/metadata/finalizers/0"}],
                                          dry_run="All")
                return False
            except ApiException as e:
                return "refuses the release" in (e.body or "")
        wait_for(refused, 60, interval=0.5, what="the refusing policy enforced")
        core.delete_namespaced_pod(first, namespace)
        wait_for(lambda: core.read_namespaced_pod(first, namespace).status.phase == "Failed", 120, interval=1,
                 what="the worker server stopped")
        batch.delete_namespaced_job(job_of(namespace, "fz", "worker"), namespace,
                                    propagation_policy="Background")
        wait_for(lambda: not batch.list_namespaced_job(namespace, label_selector=selector).items, 60,
                 what="the worker Job gone")
        held = core.read_namespaced_pod(first, namespace)
        assert held.metadata.deletion_timestamp and "batch.kubernetes.io/job-tracking" in held.metadata.finalizers
        said = " ".join(run("tfhelm", "down", "fz", "-n", namespace).stderr.split())
        assert re.search(r"released [1-9]\d* pod\(s\) of its deleted Jobs from the Job controller's finalizer",
                         said), said
        wait_for(lambda: not _exists(lambda: core.read_namespaced_pod(first, namespace)), 60, interval=1,
                 what="the held pod gone")
    finally:
        admission.delete_validating_admission_policy_binding(name)
        admission.delete_validating_admission_policy(name)
    deleted_entirely(core, namespace)
