import base64
from decimal import Decimal

import pytest

from tfhelm.contract import CLUSTER_LABEL
from tfhelm.errors import AdmissionRefused, ClusterUnreachable, Forbidden, SpecError, TfhelmError
from tfhelm.kube import Kube
from tfhelm.workspace import actions, userspec
from tfhelm.workspace.userspec import UserOptions, cluster_values_for_user, compute_user_values

from .fake_apiserver import FakeApiServer, served


def test_namespace_and_names():
    assert userspec.user_namespace("alice") == "tfhelm-user-alice"
    assert userspec.files_url("alice") == "http://user-env-files.tfhelm-user-alice.svc:8080/"
    assert userspec.claim_name("logs") == "user-env-logs" and userspec.token_secret() == "user-env-notebook-token"
    assert len(userspec.user_namespace("a" * userspec.MAX_USER)) == 63


def test_namespace_enforces_restricted_and_names_the_user():
    labels = userspec.namespace_labels("alice")
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    assert labels[userspec.USER_LABEL] == "alice"


@pytest.mark.parametrize("name", ["Alice", "1bob", "a_b", "-a", "a-", "", "a" * (userspec.MAX_USER + 1)])
def test_bad_user_names(name):
    with pytest.raises(SpecError) as exc:
        userspec.user_namespace(name)
    assert exc.value.field == "NAME"


def test_options_become_values_without_a_token():
    v = compute_user_values(UserOptions("alice", storage_class="nfs-client", quota_cpu="8",
                                        quota_memory="32Gi", node_port=30088, tensorboard_node_port=30089))
    assert v == {"userName": "alice", "storage": {"storageClassName": "nfs-client"},
                 "quota": {"cpu": "8", "memory": "32Gi"},
                 "notebook": {"service": {"nodePort": 30088}},
                 "tensorboard": {"service": {"nodePort": 30089}}}
    assert compute_user_values(UserOptions("bob")) == {"userName": "bob"}


def test_the_fence_options_become_values():
    v = compute_user_values(UserOptions(
        "alice", quota_gpus=2, quota_objects=["pods=40", "count/configmaps=10"],
        priority_classes=["team-high", "team-high", "batch-low"], metrics_from=["monitoring"],
        max_cpu="4", max_memory="16Gi"))
    assert v["quota"] == {"gpus": 2, "objects": {"pods": "40", "count/configmaps": "10"},
                          "priorityClasses": ["team-high", "batch-low"]}
    assert v["limitRange"] == {"max": {"cpu": "4", "memory": "16Gi"}, "default": {"cpu": "4", "memory": "2Gi"}}
    assert v["networkPolicy"] == {"metricsFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}


@pytest.mark.parametrize("opts,field", [
    (UserOptions("a", quota_cpu="8 cores"), "--quota-cpu"),
    (UserOptions("a", quota_memory="-1Gi"), "--quota-memory"),
    (UserOptions("a", node_port=8888), "--node-port"),
    (UserOptions("a", tensorboard_node_port=40000), "--tensorboard-node-port"),
    (UserOptions("a", node_port=30000, tensorboard_node_port=30000), "--tensorboard-node-port"),
    (UserOptions("a", storage_class="Fast SSD"), "--storage-class"),
    (UserOptions("a", quota_cpu="300m"), "--quota-cpu"),  # less than the workspace's own pods
    (UserOptions("a", quota_memory="1Gi"), "--quota-memory"),
    (UserOptions("a", quota_gpus=-1), "--quota-gpus"),
    (UserOptions("a", quota_objects=["pods"]), "--quota"),
    (UserOptions("a", quota_objects=["count/configmaps=lots"]), "--quota"),
    (UserOptions("a", quota_objects=["requests.cpu=4"]), "--quota"),
    (UserOptions("a", priority_classes=["system-node-critical"]), "--priority-class"),
    (UserOptions("a", priority_classes=["Team High"]), "--priority-class"),
    (UserOptions("a", metrics_from=["Monitoring!"]), "--metrics-from"),
    (UserOptions("a", max_cpu="8 cores"), "--max-cpu"),
    (UserOptions("a", max_memory="1Gi"), "--max-memory"),  # below the notebook's own limit
])
def test_bad_options_name_the_field(opts, field):
    with pytest.raises(SpecError) as exc:
        compute_user_values(opts)
    assert exc.value.field == field


def test_the_workspace_requests_are_summed_from_the_chart():
    # notebook, TensorBoard, its login proxy, the file server
    assert userspec.workspace_requests("cpu") == Decimal("0.36")
    assert userspec.workspace_requests("memory") == (1024 + 512 + 32 + 64) * 2**20
    with pytest.raises(SpecError, match=r"300m is less than the workspace itself requests \(0.36\)"):
        compute_user_values(UserOptions("a", quota_cpu="300m"))
    with pytest.raises(SpecError, match=r"requests \(1632Mi\)"):
        compute_user_values(UserOptions("a", quota_memory="1Gi"))


def test_cluster_values_wire_the_users_volumes():
    assert cluster_values_for_user("alice", None) == {
        "storage": {"logs": {"existingClaim": "user-env-logs"}, "data": {"existingClaim": "user-env-data"}}}


@pytest.mark.parametrize("script,url,name", [
    ("train.py", "train.py", "train.py"),
    ("./models/train.py", "models/train.py", "train.py"),
    ("my models/train v2.py", "my%20models/train%20v2.py", "train v2.py"),
])
def test_relative_script_is_downloaded_from_the_users_file_server(script, url, name):
    code = cluster_values_for_user("alice", script)["code"]
    assert code == {"source": "url", "url": "http://user-env-files.tfhelm-user-alice.svc:8080/" + url,
                    "script": name}


def test_urls_and_image_paths_are_taken_as_tfhelm_up_takes_them():
    assert cluster_values_for_user("a", "https://x.example/t.py")["code"]["url"] == "https://x.example/t.py"
    assert cluster_values_for_user("a", "/opt/app/train.py")["code"] == {"source": "image",
                                                                         "script": "/opt/app/train.py"}


@pytest.mark.parametrize("script", ["../secret.py", "models/", ".hidden/train.py", "a/.env", ""])
def test_bad_code_volume_paths(script):
    with pytest.raises(SpecError) as exc:
        cluster_values_for_user("alice", script)
    assert exc.value.field == "--script"


# --- actions against the real Kube on an API server in memory ----------------------------

class WorkspaceKube(Kube):
    """The real Kube on a FakeApiServer; what goes through discovery and server-side apply
    (the dynamic client) is answered here: the cluster serves the policy and enforces it."""

    def __init__(self, server: FakeApiServer, kueue: bool = False):
        super().__init__(api=server)
        self.server, self.applied, self.kueue = server, [], kueue

    def ping(self):
        return "v1.36.3"

    def serves(self, obj):
        return self.kueue or not obj["apiVersion"].startswith("kueue.x-k8s.io/")

    def apply(self, obj, namespace=None):
        self.applied.append(obj)

    def dry_run_apply(self, namespace, objects):
        [probe] = objects
        raise AdmissionRefused(namespace, probe["kind"], probe["metadata"]["name"],
                               f"ValidatingAdmissionPolicy '{actions.POLICY}' with binding denied request")


class FakeHelm:
    def __init__(self, fail: bool = False, rendered: list[dict] | None = None):
        self.fail, self.installed, self.rendered = fail, {}, rendered or []

    def template(self, release, values, namespace, chart):
        return self.rendered

    def install_or_upgrade(self, release, values, namespace, chart, wait=True):
        if self.fail:
            raise TfhelmError("install failed")
        self.installed[(namespace, release)] = (chart, values)

    def uninstall(self, release, namespace, wait=True):
        return self.installed.pop((namespace, release), None) is not None


NS = "/api/v1/namespaces/tfhelm-user-alice"
TOKEN = f"{NS}/secrets/{userspec.token_secret()}"


def token_of(server: FakeApiServer) -> str:
    return base64.b64decode(server.objects[TOKEN]["data"]["token"]).decode()


def test_add_makes_namespace_and_token_and_never_passes_the_token_to_helm():
    kube, helm = WorkspaceKube(FakeApiServer()), FakeHelm()
    actions.add(UserOptions("alice"), helm, kube)
    # The cluster-wide fence comes first: each policy and its binding, the Services' last
    # (its enforcement is what add waits for).
    applied = [(o["kind"], o["metadata"]["name"]) for o in kube.applied]
    assert applied[-2:] == [("ValidatingAdmissionPolicy", actions.POLICY),
                            ("ValidatingAdmissionPolicyBinding", actions.POLICY)]
    assert {name for kind, name in applied} == {
        "tfhelm-user-services", "tfhelm-user-release-records", "tfhelm-user-network-policies",
        "tfhelm-user-node"}
    assert len(applied) == 8
    assert kube.server.objects[NS]["metadata"]["labels"] == userspec.namespace_labels("alice")
    token = token_of(kube.server)
    assert len(token) >= 40
    chart, values = helm.installed[("tfhelm-user-alice", userspec.RELEASE)]
    assert chart == "user-env" and token not in repr(values)
    actions.add(UserOptions("alice", quota_cpu="2"), helm, kube)  # again: upgrade
    assert token_of(kube.server) == token


def test_where_kueue_runs_a_workspace_gets_its_queue_and_the_priority_policy():
    kube, helm = WorkspaceKube(FakeApiServer(), kueue=True), FakeHelm()
    with pytest.raises(SpecError, match="no Kueue ResourceFlavor 'default-flavor'"):
        actions.add(UserOptions("alice"), helm, kube)
    assert not helm.installed and "/api/v1/namespaces/tfhelm-user-alice" not in kube.server.objects
    kube.server.put("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/default-flavor", {"metadata": {"name": "default-flavor"}})
    actions.add(UserOptions("alice", priorities=["low"]), helm, kube)
    _, values = helm.installed[("tfhelm-user-alice", userspec.RELEASE)]
    assert values["queue"] == {"enabled": True, "priorityClasses": ["low"]}
    assert ("ValidatingAdmissionPolicy", actions.PRIORITY_POLICY) in [(o["kind"], o["metadata"]["name"]) for o in kube.applied]
    # Asked for where there is no Kueue: one line, nothing made.
    bare = WorkspaceKube(FakeApiServer())
    with pytest.raises(SpecError, match="--queue: this cluster has no Kueue"):
        actions.add(UserOptions("bob", queue_cpu="2"), FakeHelm(), bare)
    assert "/api/v1/namespaces/tfhelm-user-bob" not in bare.server.objects
    actions.add(UserOptions("carol", queue=False), FakeHelm(), WorkspaceKube(FakeApiServer(), kueue=True))


def test_failed_first_install_leaves_no_namespace():
    kube = WorkspaceKube(FakeApiServer())
    with pytest.raises(TfhelmError):
        actions.add(UserOptions("alice"), FakeHelm(fail=True), kube)
    assert [c for c in kube.server.calls if c.startswith(("POST", "DELETE"))] == [
        "POST /api/v1/namespaces", f"POST {NS}/secrets", f"DELETE {NS}"]
    assert not kube.server.objects


def test_a_failed_upgrade_deletes_only_the_token_it_made():
    kube = WorkspaceKube(FakeApiServer())
    kube.server.put(NS, {"metadata": {"name": "tfhelm-user-alice", "labels": userspec.namespace_labels("alice")}})
    with pytest.raises(TfhelmError):
        actions.add(UserOptions("alice"), FakeHelm(fail=True), kube)
    assert list(kube.server.objects) == [NS]


def test_add_refuses_a_namespace_that_is_not_the_users():
    kube = WorkspaceKube(FakeApiServer())
    kube.server.put(NS, {"metadata": {"name": "tfhelm-user-alice", "labels": {"team": "x"}}})
    with pytest.raises(TfhelmError, match="not the workspace of user alice"):
        actions.add(UserOptions("alice"), FakeHelm(), kube)


def test_a_refused_request_names_the_object_and_a_forbidden_one_is_exit_3():
    kube = WorkspaceKube(FakeApiServer())
    kube.server.refuse[f"GET {NS}"] = (403, 'namespaces "tfhelm-user-alice" is forbidden: User "bob" cannot get')
    with pytest.raises(Forbidden, match="Namespace tfhelm-user-alice: forbidden"):
        actions.add(UserOptions("alice"), FakeHelm(), kube)
    kube.server.refuse[f"GET {NS}"] = (500, "etcd is gone")
    with pytest.raises(TfhelmError, match=r"Namespace tfhelm-user-alice: the API server refused \(500\): etcd"):
        actions.require_workspace("alice", kube)
    kube.server.down = True
    with pytest.raises(ClusterUnreachable):
        actions.require_workspace("alice", kube)


def test_remove_revokes_every_account_and_grant_and_keeps_the_volumes_and_the_fence():
    kube, helm = WorkspaceKube(FakeApiServer()), FakeHelm()
    actions.add(UserOptions("alice"), helm, kube)
    ws = {"app.kubernetes.io/instance": userspec.RELEASE}
    keep = {"helm.sh/resource-policy": "keep"}
    for path, name, labels, extra in (
            ("/apis/apps/v1/namespaces/tfhelm-user-alice/deployments", "user-env-notebook", ws, {}),
            (f"{NS}/services", "user-env-notebook", ws, {}),
            (f"{NS}/persistentvolumeclaims", "user-env-logs", ws, {"annotations": keep}),
            ("/apis/networking.k8s.io/v1/namespaces/tfhelm-user-alice/networkpolicies", "user-env-same-namespace",
             ws, {"annotations": keep}),
            (f"{NS}/resourcequotas", "user-env", ws, {"annotations": keep}),
            (f"{NS}/serviceaccounts", "user-env-notebook", ws, {}), (f"{NS}/serviceaccounts", "default", {}, {}),
            ("/apis/rbac.authorization.k8s.io/v1/namespaces/tfhelm-user-alice/roles", "user-env-notebook", ws, {}),
            # What the user made with the notebook's account, and a TF cluster's reaper.
            (f"{NS}/serviceaccounts", "backdoor", {}, {}), (f"{NS}/serviceaccounts", "mnist-reaper", {}, {}),
            ("/apis/rbac.authorization.k8s.io/v1/namespaces/tfhelm-user-alice/roles", "backdoor", {}, {}),
            ("/apis/rbac.authorization.k8s.io/v1/namespaces/tfhelm-user-alice/rolebindings", "backdoor", {}, {}),
            ("/apis/apps/v1/namespaces/tfhelm-user-alice/deployments", "mnist-ps-0",
             {"app.kubernetes.io/instance": "mnist-ps", CLUSTER_LABEL: "mnist"}, {})):
        kube.server.put(f"{path}/{name}", {"metadata": {"name": name, "labels": labels, **extra}})
    kube.server.put(f"{NS}/secrets/backdoor-token", {"metadata": {"name": "backdoor-token"},
                                                     "type": "kubernetes.io/service-account-token"})
    kube.server.put(f"{NS}/secrets/sh.helm.release.v1.user-env.v1", {
        "metadata": {"name": "sh.helm.release.v1.user-env.v1", "labels": {"owner": "helm", "name": "user-env"}},
        "data": {"release": "planted; never read"}})
    notes = []
    removal = actions.remove("alice", kube, notify=notes.append)
    assert removal.deleted == ["Deployment user-env-notebook", "Service user-env-notebook"]
    assert sorted(removal.kept) == ["NetworkPolicy user-env-same-namespace", "PersistentVolumeClaim user-env-logs",
                                    "ResourceQuota user-env"]
    assert removal.revoked == [
        "ServiceAccount backdoor", "ServiceAccount mnist-reaper", "ServiceAccount user-env-notebook",
        "RoleBinding backdoor", "Role backdoor", "Role user-env-notebook",
        "Secret backdoor-token (a ServiceAccount token)", "Secret user-env-notebook-token (the login token)"]
    assert notes[0] == f"uninstalled release tfhelm-user-alice/{userspec.RELEASE} (its objects, by their labels; no hooks run)"
    assert notes[1].startswith("revoked in tfhelm-user-alice: ServiceAccount backdoor, ")
    left = {p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1] for p in kube.server.objects if p != NS}
    assert left == {"serviceaccounts/default", "persistentvolumeclaims/user-env-logs", "resourcequotas/user-env",
                    "networkpolicies/user-env-same-namespace", "deployments/mnist-ps-0"}
    assert actions.remove("alice", kube, purge=True) is not None
    assert NS not in kube.server.objects  # deleted, with everything in it
    assert actions.remove("alice", kube) is None


def test_add_again_drops_a_fence_object_its_values_no_longer_hold():
    rendered = [{"kind": "NetworkPolicy", "metadata": {"name": "user-env-same-namespace"}},
                {"kind": "ResourceQuota", "metadata": {"name": "user-env"}}]
    kube, helm = WorkspaceKube(FakeApiServer()), FakeHelm(rendered=rendered)
    policy = {"app.kubernetes.io/instance": userspec.RELEASE, "app.kubernetes.io/component": "policy"}
    for path, name in (("/apis/networking.k8s.io/v1/namespaces/tfhelm-user-alice/networkpolicies", "user-env-metrics"),
                       ("/apis/networking.k8s.io/v1/namespaces/tfhelm-user-alice/networkpolicies",
                        "user-env-same-namespace"), (f"{NS}/resourcequotas", "user-env")):
        kube.server.put(f"{path}/{name}", {"metadata": {"name": name, "labels": policy}})
    notes = []
    actions.add(UserOptions("alice"), helm, kube, notify=notes.append)
    assert "deleted NetworkPolicy user-env-metrics from tfhelm-user-alice: the workspace's values no longer hold it" in notes
    assert not [p for p in kube.server.objects if p.endswith("/user-env-metrics")]
    assert [p for p in kube.server.objects if p.endswith("/user-env-same-namespace")]


def test_add_refuses_a_priority_class_the_cluster_does_not_have_before_changing_anything():
    kube = WorkspaceKube(FakeApiServer())
    with pytest.raises(SpecError, match="there is no PriorityClass 'team-high'"):
        actions.add(UserOptions("alice", priority_classes=["team-high"]), FakeHelm(), kube)
    assert not kube.server.objects and not kube.applied
    kube.server.put("/apis/scheduling.k8s.io/v1/priorityclasses/team-high", {"metadata": {"name": "team-high"}})
    actions.add(UserOptions("alice", priority_classes=["team-high"]), FakeHelm(), kube)


def deployment(ns: str, component: str, want: int, available: int, pod_labels: dict) -> tuple[str, dict]:
    name = userspec.component_name(component)
    return f"/apis/apps/v1/namespaces/{ns}/deployments/{name}", {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/instance": userspec.RELEASE,
                                              "app.kubernetes.io/component": component}},
        "spec": {"replicas": want, "selector": {"matchLabels": pod_labels},
                 "template": {"spec": {"containers": [{"name": component}]}}},
        "status": {"availableReplicas": available, "readyReplicas": available}}


def pod(ns: str, name: str, labels: dict, phase: str, node: str | None = None, waiting: str | None = None):
    statuses = [{"name": "c", "state": {"waiting": {"reason": waiting}}}] if waiting else []
    return f"/api/v1/namespaces/{ns}/pods/{name}", {
        "metadata": {"name": name, "labels": labels}, "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "containerStatuses": statuses}}


def test_what_is_not_ready_and_what_still_runs():
    server, ns = FakeApiServer(), "tfhelm-user-alice"
    for path, obj in (deployment(ns, "notebook", 1, 0, {"c": "nb"}), deployment(ns, "files", 1, 1, {"c": "f"}),
                      deployment(ns, "tensorboard", 1, 0, {"c": "tb"}),
                      pod(ns, "nb-1", {"c": "nb"}, "Pending", "node-1", waiting="ImagePullBackOff"),
                      pod(ns, "tb-1", {"c": "tb"}, "Pending"),
                      pod(ns, "w-0", {CLUSTER_LABEL: "mnist"}, "Running", "node-1"),
                      pod(ns, "done", {CLUSTER_LABEL: "old"}, "Succeeded", "node-1"),
                      pod(ns, "mine", {}, "Running", "node-1")):
        server.put(path, obj)
    kube = served(server)
    assert actions.not_ready("alice", kube) == {"notebook": "ImagePullBackOff", "tensorboard": "not scheduled yet"}
    assert actions.still_running("alice", kube) == ["TF cluster mnist", "3 other pod(s)"]  # the workspace's too


def test_list_users_gives_each_workspaces_state():
    server = FakeApiServer()
    for user, terminating in (("alice", False), ("bob", False), ("carol", True)):
        server.put(f"/api/v1/namespaces/tfhelm-user-{user}", {
            "metadata": {"name": f"tfhelm-user-{user}", "labels": userspec.namespace_labels(user)},
            "status": {"phase": "Terminating" if terminating else "Active"}})
    server.put("/api/v1/namespaces/default", {"metadata": {"name": "default"}})
    server.put(*deployment("tfhelm-user-alice", "notebook", 1, 1, {}))
    server.put(*deployment("tfhelm-user-alice", "files", 1, 0, {}))
    assert [(r.user, r.namespace, r.state) for r in actions.list_users(served(server))] == [
        ("alice", "tfhelm-user-alice", "starting (1/2 ready)"), ("bob", "tfhelm-user-bob", "removed (volumes kept)"),
        ("carol", "tfhelm-user-carol", "being deleted")]


def test_urls_give_the_token_and_the_node_port_on_the_pods_node():
    server, ns = FakeApiServer(), "tfhelm-user-alice"
    kube = served(server)
    with pytest.raises(SpecError, match="no login token"):
        actions.urls("alice", kube)
    server.put(TOKEN, {"metadata": {"name": userspec.token_secret()}, "stringData": {"token": "s3cret"}})
    notebook = userspec.component_name("notebook")
    server.put(f"/api/v1/namespaces/{ns}/services/{notebook}", {
        "metadata": {"name": notebook}, "spec": {"type": "NodePort", "selector": {"c": "nb"},
                                                 "ports": [{"port": 8888, "nodePort": 30088}]}})
    server.put(*pod(ns, "nb-1", {"c": "nb"}, "Running", "node-1"))
    server.put("/api/v1/nodes/node-1", {"metadata": {"name": "node-1"}, "status": {"addresses": [
        {"type": "Hostname", "address": "node-1"}, {"type": "InternalIP", "address": "10.0.0.7"}]}})
    tensorboard = userspec.component_name("tensorboard")
    server.put(f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/{tensorboard}", {
        "metadata": {"name": tensorboard},
        "spec": {"rules": [{"host": "tb.example"}], "tls": [{"hosts": ["tb.example"]}]}})
    server.put(*deployment(ns, "tensorboard", 1, 1, {}))
    server.objects[f"/apis/apps/v1/namespaces/{ns}/deployments/{tensorboard}"]["spec"]["template"]["spec"][
        "containers"].append({"name": "auth"})
    u = actions.urls("alice", kube)
    assert u.notebook == "http://10.0.0.7:30088/?token=s3cret"
    assert u.tensorboard == "https://tb.example/?token=s3cret"  # behind its login proxy
    assert u.files is None


def test_a_wheel_directory_on_the_users_code_volume_is_their_file_servers_url():
    assert userspec.files_dir_url("alice", "wheels", "--pip-find-links") == \
        "http://user-env-files.tfhelm-user-alice.svc:8080/wheels/"
    assert userspec.files_dir_url("alice", "deps/wheels/", "--pip-find-links").endswith(":8080/deps/wheels/")
    assert userspec.files_dir_url("alice", "/data/wheels", "--pip-find-links") == "/data/wheels"
    assert userspec.files_dir_url("alice", "https://w.example/", "--pip-find-links") == "https://w.example/"
    with pytest.raises(SpecError, match="--pip-find-links: '../x' is not a path on the code volume"):
        userspec.files_dir_url("alice", "../x", "--pip-find-links")
