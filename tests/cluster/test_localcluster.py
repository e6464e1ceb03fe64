"""The local cluster behaves like a real one where the charts depend on it:
admission (Pod Security), RBAC with TokenRequest tokens, the Job controller with
kwok's simulated pod lifecycle, scheduling onto the right nodes, and volumes."""

from __future__ import annotations

import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tfhelm_dev import localcluster

from .conftest import wait_for

RESTRICTED = client.V1SecurityContext(
    run_as_non_root=True, run_as_user=1000, allow_privilege_escalation=False,
    capabilities=client.V1Capabilities(drop=["ALL"]),
    seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))


def pod_spec(restart_policy: str = "Never", **kw) -> client.V1PodSpec:
    return client.V1PodSpec(
        restart_policy=restart_policy, automount_service_account_token=False,
        containers=[client.V1Container(name="main", image="busybox:1.36", command=["true"],
                                       security_context=RESTRICTED)], **kw)


def make_job(name: str, *, completions: int = 1, backoff_limit: int = 6,
             labels: dict | None = None, annotations: dict | None = None) -> client.V1Job:
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(
            completions=completions, parallelism=completions, completion_mode="Indexed",
            backoff_limit=backoff_limit,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels, annotations=annotations),
                spec=pod_spec())))


def job_condition(batch: client.BatchV1Api, ns: str, name: str) -> str | None:
    job = batch.read_namespaced_job(name, ns)
    for c in job.status.conditions or []:
        if c.type in ("Complete", "Failed") and c.status == "True":
            return c.type
    return None


@pytest.fixture(scope="module")
def batch(api_client) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


def test_nodes_ready_with_user_node(core, external_cluster):
    nodes = core.list_node().items

    def ready(n):
        return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    assert nodes and all(ready(n) for n in nodes)
    if not external_cluster:  # the simulated nodes; the real ones are checked below
        nodes = [n for n in nodes if (n.metadata.labels or {}).get("type") == "kwok"]
    user = [n for n in nodes if (n.metadata.labels or {}).get("tfhelm.io/node-role") == "user"]
    assert user, "no node labelled tfhelm.io/node-role=user"
    taints = {(t.key, t.value, t.effect) for t in user[0].spec.taints or []}
    assert ("tfhelm.io/user-node", "true", "NoSchedule") in taints
    if not external_cluster:
        assert user[0].metadata.name == localcluster.node_names(len(nodes))[-1]
        assert "node-role.kubernetes.io/user" in user[0].metadata.labels
        gpus = [n for n in nodes if "nvidia.com/gpu" in (n.status.allocatable or {})]
        assert gpus and gpus[0].status.allocatable["nvidia.com/gpu"] == "8"
    else:
        assert any(not n.spec.taints for n in nodes), "no untainted worker node"


def test_the_real_nodes_take_every_pod_that_does_not_ask_for_simulation(core, external_cluster):
    """The user node is labelled and tainted for real (the kubelet registers it so), the
    training nodes take everything else; kwok nodes only what asks for simulation."""
    real = localcluster.real_nodes()
    if external_cluster or not real:
        pytest.skip("the local cluster's real nodes only")
    user_taint = tuple(localcluster.USER_NODE_TAINT[k] for k in ("key", "value", "effect"))
    for node in real:
        obj = core.read_node(node.name)
        labels, taints = obj.metadata.labels, {(t.key, t.value, t.effect) for t in obj.spec.taints or []}
        assert labels["tfhelm.io/real-node"] == "true"
        assert "kwok.x-k8s.io/node" not in (obj.metadata.annotations or {})  # kwok leaves it alone
        assert {a.address for a in obj.status.addresses} >= {node.net.ip}
        if node.user:
            assert labels[localcluster.USER_NODE_LABEL[0]] == localcluster.USER_NODE_LABEL[1]
            assert "node-role.kubernetes.io/user" in labels
        # Tainted unless it is the only node, which then runs training too.
        assert taints == ({user_taint} if node.user and len(real) > 1 else set()), taints
    for n in core.list_node(label_selector="type=kwok").items:
        assert {(t.key, t.value, t.effect) for t in n.spec.taints} >= {
            tuple(localcluster.KWOK_TAINT[k] for k in ("key", "value", "effect"))}


def test_restricted_namespace_rejects_privileged_pod(core, namespace):
    spec = pod_spec()
    spec.containers[0].security_context = client.V1SecurityContext(privileged=True)
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="privileged"), spec=spec)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(namespace, pod)
    assert err.value.status == 403
    assert "violates PodSecurity" in err.value.body

    # A pod that meets "restricted" is admitted, scheduled onto a worker, and runs.
    ok = client.V1Pod(metadata=client.V1ObjectMeta(name="restricted"),
                      spec=pod_spec(restart_policy="Always"))
    core.create_namespaced_pod(namespace, ok)
    pod = wait_for(lambda: (p := core.read_namespaced_pod("restricted", namespace))
                   .status.phase == "Running" and p, what="pod Running")
    assert pod.spec.node_name and not pod.spec.node_name.endswith("-user")


def test_indexed_job_completes(batch, core, namespace):
    batch.create_namespaced_job(namespace, make_job("workers", completions=3))
    assert wait_for(lambda: job_condition(batch, namespace, "workers"), 90,
                    what="job workers to finish") == "Complete"
    job = batch.read_namespaced_job("workers", namespace)
    assert job.status.succeeded == 3 and job.status.completed_indexes == "0-2"
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=workers").items
    indexes = sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert indexes == ["0", "1", "2"]
    for p in pods:
        assert p.status.phase == "Succeeded"
        assert p.status.container_statuses[0].state.terminated.exit_code == 0


def test_fail_label_fails_job(batch, core, namespace):
    batch.create_namespaced_job(namespace, make_job(
        "doomed", backoff_limit=0, labels={"tfhelm.io/kwok-fail": "true"},
        annotations={"tfhelm.io/kwok-complete-after": "1s"}))
    assert wait_for(lambda: job_condition(batch, namespace, "doomed"), 90,
                    what="job doomed to finish") == "Failed"
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=doomed").items
    assert len(pods) == 1 and pods[0].status.phase == "Failed"
    assert pods[0].status.container_statuses[0].state.terminated.exit_code == 1


def test_complete_after_annotation_delays_completion(batch, core, namespace):
    batch.create_namespaced_job(namespace, make_job(
        "slow", annotations={"tfhelm.io/kwok-complete-after": "10m"}))
    wait_for(lambda: [p for p in core.list_namespaced_pod(namespace).items
                      if p.status.phase == "Running"], 60, what="pod of slow Running")
    time.sleep(5)  # past the default 3s delay
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=slow").items
    assert [p.status.phase for p in pods] == ["Running"]
    assert job_condition(batch, namespace, "slow") is None


def test_deployment_pods_keep_running_and_delete(api_client, core, namespace):
    apps = client.AppsV1Api(api_client)
    labels = {"app": "ps"}
    apps.create_namespaced_deployment(namespace, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="ps"),
        spec=client.V1DeploymentSpec(
            replicas=1, selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=labels),
                                              spec=pod_spec(restart_policy="Always")))))
    wait_for(lambda: apps.read_namespaced_deployment("ps", namespace).status.ready_replicas,
             60, what="deployment ps ready")
    pod = core.list_namespaced_pod(namespace, label_selector="app=ps").items[0]
    apps.delete_namespaced_deployment("ps", namespace)
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector="app=ps").items,
             60, what="pods of ps deleted")
    assert pod.status.phase == "Running"


@pytest.mark.parametrize("mode", ["ReadWriteOnce", "ReadWriteMany"])
def test_pvc_binds_and_pod_uses_it(core, namespace, mode):
    core.create_namespaced_persistent_volume_claim(namespace, client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="data"),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=[mode], resources=client.V1VolumeResourceRequirements(
                requests={"storage": "5Gi"}))))
    wait_for(lambda: core.read_namespaced_persistent_volume_claim("data", namespace)
             .status.phase == "Bound", 60, what="pvc data Bound")
    spec = pod_spec(restart_policy="Always", volumes=[client.V1Volume(
        name="data", persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name="data"))])
    spec.containers[0].volume_mounts = [client.V1VolumeMount(name="data", mount_path="/data")]
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="uses-data"), spec=spec))
    wait_for(lambda: core.read_namespaced_pod("uses-data", namespace).status.phase == "Running",
             60, what="pod using the pvc Running")


def test_rbac_denies_serviceaccount_token(api_client, core, namespace):
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody")))
    token = core.create_namespaced_service_account_token(
        "nobody", namespace, client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token

    admin = api_client.configuration
    cfg = client.Configuration(host=admin.host)
    cfg.ssl_ca_cert, cfg.verify_ssl = admin.ssl_ca_cert, admin.verify_ssl
    cfg.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(cfg) as sa_client:
        # The token authenticates (this is RBAC saying no, not a 401) ...
        review = client.AuthenticationV1Api(sa_client).create_self_subject_review(
            client.V1SelfSubjectReview())
        assert review.status.user_info.username == f"system:serviceaccount:{namespace}:nobody"
        # ... and RBAC denies reading secrets.
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(sa_client).list_namespaced_secret(namespace)
        assert err.value.status == 403


def test_no_service_may_claim_an_external_ip(core, namespace, external_cluster):
    """DenyServiceExternalIPs: not even the cluster admin may make kube-proxy send traffic
    for an outside address to a Service (CVE-2020-8554)."""
    if external_cluster:
        pytest.skip("the admission plugins are the local cluster's")
    service = client.V1Service(metadata=client.V1ObjectMeta(name="capture"), spec=client.V1ServiceSpec(
        external_ips=["10.231.0.1"], ports=[client.V1ServicePort(port=53)]))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service(namespace, service)
    assert err.value.status == 403 and "external IPs is denied" in err.value.body, err.value.body
