"""User workspaces on the local cluster: `tfhelm user add/url/list/remove`, Pod Security,
RBAC with each user's ServiceAccount token, and a TF cluster wired to a user's workspace."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tfhelm.cluster import deploy
from tfhelm.cluster.values import ClusterOptions
from tfhelm.helm import Helm, helm_executable
from tfhelm.kube import Kube
from tfhelm.workspace import userspec
from tfhelm_dev import localcluster

from .conftest import wait_for

COMPONENTS = ("notebook", "tensorboard", "files")
RESTRICTED = client.V1SecurityContext(
    run_as_non_root=True, run_as_user=1000, allow_privilege_escalation=False,
    capabilities=client.V1Capabilities(drop=["ALL"]), seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
INSTANCE = f"app.kubernetes.io/instance={userspec.RELEASE}"


def tfhelm(*args: str, code: int = 0, kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
    """The real CLI in its own process, as people run it (output, exit code, KUBECONFIG)."""
    env = {**os.environ, **({"KUBECONFIG": str(kubeconfig)} if kubeconfig else {})}
    result = subprocess.run([sys.executable, "-m", "tfhelm", *args], env=env, timeout=600,
                            capture_output=True, text=True)
    assert result.returncode == code, result.stdout + result.stderr
    return result


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def token_of(core: client.CoreV1Api, user: str) -> str:
    secret = core.read_namespaced_secret(userspec.token_secret(), userspec.user_namespace(user))
    return base64.b64decode(secret.data[userspec.TOKEN_KEY]).decode()


def wait_ready(apps: client.AppsV1Api, ns: str) -> None:
    for component in COMPONENTS:
        name = userspec.component_name(component)
        wait_for(lambda: apps.read_namespaced_deployment(name, ns).status.ready_replicas == 1,
                 120, what=f"deployment {ns}/{name} ready")


@pytest.fixture(scope="module")
def apps(api_client) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture(scope="module")
def two_users(kubeconfig, core, apps):
    """Users A and B with workspaces, purged afterwards."""
    names = [unique("ua"), unique("ub")]
    for name in names:
        tfhelm("user", "add", name)
        wait_ready(apps, userspec.user_namespace(name))
    yield names
    for name in names:
        tfhelm("user", "remove", name, "--purge")


def sa_kubeconfig(api_client: client.ApiClient, core: client.CoreV1Api, user: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the user's notebook ServiceAccount (TokenRequest),
    the identity the notebook gets in its pod."""
    ns = userspec.user_namespace(user)
    token = core.create_namespaced_service_account_token(
        userspec.service_account(), ns, client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token
    admin = api_client.configuration
    cluster = {"server": admin.host, "certificate-authority": admin.ssl_ca_cert}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa", "namespace": ns}}]}))
    return path


def test_user_lifecycle(kubeconfig, core, apps):
    user = unique("lc")
    ns = userspec.user_namespace(user)
    added = tfhelm("user", "add", user, "--quota-cpu", "6", "--node-port", "31888")
    try:
        labels = core.read_namespace(ns).metadata.labels
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
        assert labels[userspec.USER_LABEL] == user
        wait_ready(apps, ns)
        # Every pod was admitted in the restricted namespace and runs on the user node.
        pods = core.list_namespaced_pod(ns, label_selector=INSTANCE).items
        assert sorted(p.metadata.labels["app.kubernetes.io/component"] for p in pods) == sorted(COMPONENTS)
        key, value = localcluster.USER_NODE_LABEL
        user_nodes = core.list_node(label_selector=f"{key}={value}").items
        assert {p.spec.node_name for p in pods} <= {n.metadata.name for n in user_nodes}
        pvcs = {p.metadata.name: p.status.phase
                for p in core.list_namespaced_persistent_volume_claim(ns).items}
        assert pvcs == {userspec.claim_name(v): "Bound" for v in ("code", "logs", "data")}
        quota = core.read_namespaced_resource_quota(userspec.RELEASE, ns)
        assert quota.spec.hard["requests.cpu"] == "6"

        token = token_of(core, user)
        urls = tfhelm("user", "url", user).stdout
        # The node port answers only on the notebook's node: the URL names that node.
        notebook = next(p for p in pods if p.metadata.labels["app.kubernetes.io/component"] == "notebook")
        addresses = {a.address for a in core.read_node(notebook.spec.node_name).status.addresses}
        assert any(f"notebook:    http://{a}:31888/?token={token}\n" in urls for a in addresses), urls
        assert f"files:       {userspec.files_url(user)}" in urls
        listed = tfhelm("user", "list").stdout
        assert user in listed and "ready" in listed

        # Something of the user's still runs: removing the user keeps it fenced in.
        core.create_namespaced_pod(ns, client.V1Pod(
            metadata=client.V1ObjectMeta(name="left", labels={"tfhelm.io/cluster": "leftover"}),
            spec=client.V1PodSpec(automount_service_account_token=False, containers=[client.V1Container(
                name="x", image="tensorflow/tensorflow:2.21.0", command=["sleep", "infinity"],
                security_context=RESTRICTED)])))
        wait_for(lambda: core.read_namespaced_pod("left", ns).status.phase == "Running", 120,
                 what="the leftover pod running")
        removed = tfhelm("user", "remove", user)
        said = " ".join(removed.stderr.split())
        assert "the code, logs and data volumes, and its NetworkPolicies, quota and LimitRange" in said
        assert f"still running in {ns}: TF cluster leftover" in said, said
        assert userspec.RELEASE not in Helm().charts(ns, [userspec.RELEASE])
        net = client.NetworkingV1Api(core.api_client)
        assert {p.metadata.name for p in net.list_namespaced_network_policy(ns).items} == {
            f"{userspec.RELEASE}-same-namespace", f"{userspec.component_name('notebook')}-exposed",
            f"{userspec.component_name('tensorboard')}-exposed"}
        assert core.read_namespaced_resource_quota(userspec.RELEASE, ns).spec.hard["requests.cpu"] == "6"
        core.delete_namespaced_pod("left", ns, grace_period_seconds=0)
        assert sorted(p.metadata.name for p in core.list_namespaced_persistent_volume_claim(ns).items) == \
            sorted(pvcs)
        with pytest.raises(ApiException):
            core.read_namespaced_secret(userspec.token_secret(), ns)
        assert "removed (volumes kept)" in tfhelm("user", "list").stdout
        for result in (added, removed):
            assert token not in result.stdout + result.stderr

        tfhelm("user", "add", user)  # again: the kept volumes and fence come back, a new token is made
        assert token_of(core, user) != token
        wait_ready(apps, ns)
        manifest = subprocess.run([helm_executable(), "get", "manifest", userspec.RELEASE, "-n", ns],
                                  capture_output=True, text=True, check=True).stdout
        assert f"name: {userspec.RELEASE}-same-namespace" in manifest  # the release owns its fence again
    finally:
        tfhelm("user", "remove", user, "--purge")
    wait_for(lambda: _gone_or_terminating(core, ns), 60, what=f"namespace {ns} deleted")
    tfhelm("user", "remove", user, code=2)


def _gone_or_terminating(core: client.CoreV1Api, ns: str) -> bool:
    try:
        return core.read_namespace(ns).status.phase == "Terminating"
    except ApiException as err:
        return err.status == 404


def test_token_is_never_in_helm_values_or_the_release(kubeconfig, core, two_users):
    user = two_users[0]
    ns = userspec.user_namespace(user)
    token = token_of(core, user)
    for what in ("values", "manifest"):
        out = subprocess.run([helm_executable(), "get", what, userspec.RELEASE, "-n", ns, "--all"]
                             if what == "values" else
                             [helm_executable(), "get", what, userspec.RELEASE, "-n", ns],
                             capture_output=True, text=True, check=True).stdout
        assert token not in out
    for args in (("user", "list"), ("user", "add", user)):  # an upgrade keeps the token, quietly
        result = tfhelm(*args)
        assert token not in result.stdout + result.stderr
    assert token_of(core, user) == token


def test_each_users_account_reaches_only_its_own_namespace(api_client, core, two_users, tmp_path):
    a, b = two_users
    ns_a, ns_b = userspec.user_namespace(a), userspec.user_namespace(b)
    cfg = sa_kubeconfig(api_client, core, a, tmp_path / "a.kubeconfig")
    with Kube(kubeconfig=str(cfg)).api as sa:
        sa_core = client.CoreV1Api(sa)
        assert sa_core.list_namespaced_pod(ns_a).items
        config_map = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="mine"))
        sa_core.create_namespaced_config_map(ns_a, config_map)
        assert sa_core.read_namespace(ns_a).metadata.name == ns_a
        everything = {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
        denied = {
            "list B's pods": lambda: sa_core.list_namespaced_pod(ns_b),
            "list B's secrets": lambda: sa_core.list_namespaced_secret(ns_b),
            "create in B": lambda: sa_core.create_namespaced_config_map(ns_b, config_map),
            "read B's namespace": lambda: sa_core.read_namespace(ns_b),
            "list namespaces": lambda: sa_core.list_namespace(),
            "list nodes": lambda: sa_core.list_node(),
            "raise its quota": lambda: sa_core.patch_namespaced_resource_quota(
                userspec.RELEASE, ns_a, {"spec": {"hard": {"requests.cpu": "999"}}}),
            "drop its NetworkPolicy": lambda: client.NetworkingV1Api(sa).delete_namespaced_network_policy(
                f"{userspec.RELEASE}-same-namespace", ns_a),
            "widen its Role": lambda: client.RbacAuthorizationV1Api(sa).patch_namespaced_role(
                userspec.service_account(), ns_a, everything),
        }
        for what, call in denied.items():
            with pytest.raises(ApiException) as err:
                call()
            assert err.value.status == 403, f"{what} was not forbidden"


def test_notebook_account_runs_tfhelm_up_in_its_namespace_only(api_client, core, two_users, tmp_path):
    a, b = two_users
    ns_a, ns_b = userspec.user_namespace(a), userspec.user_namespace(b)
    sa = sa_kubeconfig(api_client, core, a, tmp_path / "a.kubeconfig")
    # The namespace comes from the kubeconfig, as it comes from the mounted account in the pod.
    # With the reaper: its own ServiceAccount, Role and RoleBinding, granted by the notebook.
    tfhelm("up", "--name", "nb", "--workers", "1", "--ps", "1", "--set", "reaper.enabled=true",
           kubeconfig=sa)
    jobs = client.BatchV1Api(api_client).list_namespaced_job(ns_a, label_selector="tfhelm.io/cluster=nb")
    assert [j.metadata.labels["tfhelm.io/role"] for j in jobs.items] == ["worker"]
    rbac = client.RbacAuthorizationV1Api(api_client)
    roles = rbac.list_namespaced_role(ns_a, label_selector="tfhelm.io/cluster=nb")
    assert len(roles.items) == 1  # the reaper's
    # Its account reads the tasks (exit 1 if the worker already failed: no script in this tier).
    status = subprocess.run([sys.executable, "-m", "tfhelm", "status", "nb"], capture_output=True, text=True,
                            env={**os.environ, "KUBECONFIG": str(sa)}, timeout=600)
    assert status.returncode in (0, 1) and "worker:0" in status.stdout, status.stdout + status.stderr
    tfhelm("down", "nb", "--purge", kubeconfig=sa)
    refused = tfhelm("up", "--name", "nb", "--workers", "1", "--ps", "0", "-n", ns_b, code=3,
                     kubeconfig=sa)
    assert "forbidden" in refused.stderr.lower()


def test_network_policies_shut_out_other_users(api_client, two_users):
    net = client.NetworkingV1Api(api_client)
    for user in two_users:
        ns = userspec.user_namespace(user)
        policies = {p.metadata.name: p.spec for p in net.list_namespaced_network_policy(ns).items}
        same = policies[f"{userspec.RELEASE}-same-namespace"]
        assert same.pod_selector.match_labels is None and same.policy_types == ["Ingress"]
        assert [(peer.pod_selector.match_labels, peer.namespace_selector, peer.ip_block)
                for rule in same.ingress for peer in rule._from] == [(None, None, None)]
        for component in ("notebook", "tensorboard"):
            exposed = policies[f"{userspec.component_name(component)}-exposed"]
            assert exposed.pod_selector.match_labels["app.kubernetes.io/component"] == component
            assert [p.port for r in exposed.ingress for p in r.ports] == ["http"]
        assert len(policies) == 3


def test_a_users_cluster_mounts_the_users_volumes_and_downloads_from_its_file_server(kubeconfig, core,
                                                                                     two_users):
    user = two_users[0]
    ns = userspec.user_namespace(user)
    values = userspec.cluster_values_for_user(user, "models/train.py")
    plan = deploy.plan(ClusterOptions(name="wired", namespace=ns, workers=2, ps=1, value_files=[values]))
    kube = Kube(kubeconfig=str(kubeconfig))
    deploy.up(plan, Helm(), kube)
    try:
        # The wiring only (the workspace runs on the user node, where models/train.py does
        # not exist: tests/realpods trains from a file server for real).
        def workers():
            found = core.list_namespaced_pod(
                ns, label_selector="tfhelm.io/cluster=wired,app.kubernetes.io/component=worker").items
            return found if len(found) == 2 else None
        pods = wait_for(workers, 120, what="worker pods of wired created")
        for pod in pods:
            claims = {v.name: v.persistent_volume_claim.claim_name for v in pod.spec.volumes
                      if v.persistent_volume_claim}
            assert claims == {"logs": userspec.claim_name("logs"), "data": userspec.claim_name("data")}
            assert pod.spec.init_containers[0].command[2] == userspec.files_url(user) + "models/train.py"
        # No PVCs of its own: the user's volumes hold its logs and data.
        own = core.list_namespaced_persistent_volume_claim(ns, label_selector="tfhelm.io/cluster=wired")
        assert not own.items
    finally:
        deploy.down("wired", ns, Helm(), kube, purge=True)


def service(name: str, **spec) -> client.V1Service:
    return client.V1Service(metadata=client.V1ObjectMeta(name=name), spec=client.V1ServiceSpec(
        ports=[client.V1ServicePort(port=53)], **spec))


def test_a_user_cannot_create_services_that_capture_traffic(api_client, core, two_users, tmp_path):
    """CVE-2020-8554 as a tenant would try it, with the notebook's own account: no
    externalIPs, no load balancer address, no node port or load balancer of their own."""
    a = two_users[0]
    ns = userspec.user_namespace(a)
    cfg = sa_kubeconfig(api_client, core, a, tmp_path / "a.kubeconfig")
    with Kube(kubeconfig=str(cfg)).api as sa:
        sa_core = client.CoreV1Api(sa)
        refused = {
            "externalIPs": service("capture", external_ips=["10.231.0.1"]),
            "NodePort": service("np", type="NodePort"),
            "LoadBalancer": service("lb", type="LoadBalancer"),
            "loadBalancerIP": service("lbip", type="LoadBalancer", load_balancer_ip="10.231.0.1"),
            "ExternalName": service("en", type="ExternalName", external_name="kubernetes.default.svc"),
        }
        for what, svc in refused.items():
            with pytest.raises(ApiException) as err:
                sa_core.create_namespaced_service(ns, svc)
            assert err.value.status == 403, what
            # DenyServiceExternalIPs answers first for externalIPs on the local cluster.
            assert "tfhelm-user-services" in err.value.body or "external IPs is denied" in err.value.body, err.value.body
        # Nor may it turn the workspace's node port to its own pods.
        with pytest.raises(ApiException) as err:
            sa_core.patch_namespaced_service(userspec.component_name("notebook"), ns,
                                             {"spec": {"selector": {"app": "mine"}}})
        assert err.value.status == 403 and "tfhelm-user-services" in err.value.body
        # What tf-cluster makes passes: ClusterIP and headless Services.
        sa_core.create_namespaced_service(ns, service("plain"), dry_run="All")
        sa_core.create_namespaced_service(ns, service("headless", cluster_ip="None"), dry_run="All")


def test_up_for_a_user_without_a_workspace_changes_nothing(core):
    result = tfhelm("up", "--user", "nosuchuser", "--workers", "1", "--ps", "0", code=2)
    assert "user nosuchuser has no workspace (no namespace tfhelm-user-nosuchuser)" in " ".join(result.stderr.split())
    assert "tfhelm user add nosuchuser" in " ".join(result.stderr.split())
    with pytest.raises(ApiException) as err:
        core.read_namespace("tfhelm-user-nosuchuser")
    assert err.value.status == 404


def test_a_failed_code_fetch_names_the_url_and_the_http_status(two_users):
    """The workers download a script the user's file server does not have (a 404): every
    command says so in one line, with the URL, instead of "training failed" alone."""
    user = two_users[0]
    ns = userspec.user_namespace(user)
    url = userspec.files_url(user) + "missing.py"
    error = f"fetch-code: fetch {url}: HTTP Error 404: Not Found"
    up = tfhelm("up", "--user", user, "--name", "nofile", "--workers", "1", "--ps", "0", "--script", "missing.py",
                "--set", "worker.backoffLimitPerIndex=0", "--wait", "--timeout", "300", code=1)
    assert "training failed" in up.stderr and f"error of worker:0: {error}" in " ".join(up.stderr.split())
    status = tfhelm("status", "nofile", "-n", ns, code=1)
    assert "Init:Error" in status.stdout and f"error of worker:0: {error}" in " ".join(status.stdout.split())
    logs = tfhelm("logs", "nofile", "-n", ns, code=1)  # the init container's log; exit 1: it failed
    assert f"[worker-0 fetch-code] fetch {url}: HTTP Error 404: Not Found" in logs.stdout, logs.stdout + logs.stderr
    # --purge in a workspace: the user's volumes are shared by all their runs, and kept.
    down = " ".join(tfhelm("down", "nofile", "-n", ns, "--purge").stderr.split())
    assert f"kept PersistentVolumeClaim {ns}/{userspec.claim_name('logs')}: not this cluster's" in down
    assert "rm -r /log/nofile" in down and f"kept PersistentVolumeClaim {ns}/{userspec.claim_name('data')}" in down


def test_user_add_again_keeps_no_fence_object_its_flags_no_longer_ask_for(two_users, api_client):
    """`--metrics-from` makes the metrics NetworkPolicy; `user add` again without it removes
    it and says so, rather than leaving it outside any release (it is kept on uninstall)."""
    user = two_users[1]
    ns = userspec.user_namespace(user)
    net = client.NetworkingV1Api(api_client)

    def policies() -> set[str]:
        return {p.metadata.name for p in net.list_namespaced_network_policy(ns).items}
    tfhelm("user", "add", user, "--metrics-from", "monitoring")
    metrics = net.read_namespaced_network_policy(f"{userspec.RELEASE}-metrics", ns)
    assert metrics.spec.ingress[0]._from[0].namespace_selector.match_labels == {"kubernetes.io/metadata.name": "monitoring"}
    again = tfhelm("user", "add", user)
    assert f"deleted NetworkPolicy {userspec.RELEASE}-metrics from {ns}" in " ".join(again.stderr.split())
    assert f"{userspec.RELEASE}-metrics" not in policies() and f"{userspec.RELEASE}-same-namespace" in policies()


def test_gpus_are_granted_per_workspace_and_refused_before_anything_is_made(two_users, core):
    user = two_users[1]
    ns = userspec.user_namespace(user)
    refused = tfhelm("up", "--user", user, "--name", "gpu", "--workers", "1", "--ps", "0", "--gpus", "1", code=5)
    assert "exceeded quota" in refused.stderr and "requests.nvidia.com/gpu" in refused.stderr, refused.stderr
    assert not core.list_namespaced_pod(ns, label_selector="tfhelm.io/cluster=gpu").items
    tfhelm("user", "add", user, "--quota-gpus", "2")
    try:
        tfhelm("up", "--user", user, "--name", "gpu", "--workers", "1", "--ps", "0", "--gpus", "1")
        tfhelm("down", "gpu", "-n", ns)
    finally:
        tfhelm("user", "add", user)
