import base64
from decimal import Decimal
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from tfhelm import userenv, users
from tfhelm.errors import SpecError, TfhelmError
from tfhelm.users import UserOptions, cluster_values_for_user, compute_user_values


def test_namespace_and_names():
    assert users.user_namespace("alice") == "tfhelm-user-alice"
    assert users.files_url("alice") == "http://user-env-files.tfhelm-user-alice.svc:8080/"
    assert users.claim_name("logs") == "user-env-logs" and users.token_secret() == "user-env-notebook-token"
    assert len(users.user_namespace("a" * users.MAX_USER)) == 63


def test_namespace_enforces_restricted_and_names_the_user():
    labels = users.namespace_labels("alice")
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    assert labels[users.USER_LABEL] == "alice"


@pytest.mark.parametrize("name", ["Alice", "1bob", "a_b", "-a", "a-", "", "a" * (users.MAX_USER + 1)])
def test_bad_user_names(name):
    with pytest.raises(SpecError) as exc:
        users.user_namespace(name)
    assert exc.value.field == "NAME"


def test_options_become_values_without_a_token():
    v = compute_user_values(UserOptions("alice", storage_class="nfs-client", quota_cpu="8",
                                        quota_memory="32Gi", node_port=30088, tensorboard_node_port=30089))
    assert v == {"userName": "alice", "storage": {"storageClassName": "nfs-client"},
                 "quota": {"cpu": "8", "memory": "32Gi"},
                 "notebook": {"service": {"nodePort": 30088}},
                 "tensorboard": {"service": {"nodePort": 30089}}}
    assert compute_user_values(UserOptions("bob")) == {"userName": "bob"}


@pytest.mark.parametrize("opts,field", [
    (UserOptions("a", quota_cpu="8 cores"), "--quota-cpu"),
    (UserOptions("a", quota_memory="-1Gi"), "--quota-memory"),
    (UserOptions("a", node_port=8888), "--node-port"),
    (UserOptions("a", tensorboard_node_port=40000), "--tensorboard-node-port"),
    (UserOptions("a", node_port=30000, tensorboard_node_port=30000), "--tensorboard-node-port"),
    (UserOptions("a", storage_class="Fast SSD"), "--storage-class"),
    (UserOptions("a", quota_cpu="300m"), "--quota-cpu"),  # less than the workspace's own pods
    (UserOptions("a", quota_memory="1Gi"), "--quota-memory"),
])
def test_bad_options_name_the_field(opts, field):
    with pytest.raises(SpecError) as exc:
        compute_user_values(opts)
    assert exc.value.field == field


def test_the_workspace_requests_are_summed_from_the_chart():
    # notebook, TensorBoard, its login proxy, the file server
    assert users.workspace_requests("cpu") == Decimal("0.36")
    assert users.workspace_requests("memory") == (1024 + 512 + 32 + 64) * 2**20
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


# --- userenv.add/remove against fakes: what reaches Helm and the API ---------------------

def _missing(*_a, **_k):
    raise ApiException(status=404, reason="Not Found")


class FakeCore:
    def __init__(self, namespaces=None):
        self.namespaces = dict(namespaces or {})
        self.secrets: dict[tuple[str, str], object] = {}
        self.calls: list[str] = []

    def read_namespace(self, name):
        return self.namespaces.get(name) or _missing()

    def create_namespace(self, body):
        self.calls.append(f"create namespace {body.metadata.name}")
        self.namespaces[body.metadata.name] = SimpleNamespace(metadata=body.metadata, status=None)

    def patch_namespace(self, name, body):
        self.namespaces[name].metadata.labels.update(body["metadata"]["labels"])

    def delete_namespace(self, name):
        self.calls.append(f"delete namespace {name}")
        return self.namespaces.pop(name, None) or _missing()

    def read_namespaced_secret(self, name, ns):
        return self.secrets.get((ns, name)) or _missing()

    def create_namespaced_secret(self, ns, body):
        self.secrets[(ns, body.metadata.name)] = SimpleNamespace(data={
            k: base64.b64encode(v.encode()).decode() for k, v in body.string_data.items()})

    def delete_namespaced_secret(self, name, ns):
        return self.secrets.pop((ns, name), None) or _missing()

    def create_namespaced_service(self, ns, body, dry_run=None):
        # What the API server answers once the service policy is enforced in `ns`.
        assert dry_run == "All"
        err = ApiException(status=403, reason="Forbidden")
        err.body = f"ValidatingAdmissionPolicy '{userenv.POLICY}' denied request"
        raise err


class FakeHelm:
    def __init__(self, fail: bool = False):
        self.fail, self.installed = fail, {}

    def template(self, release, values, namespace, chart):
        return []

    def install_or_upgrade(self, release, values, namespace, chart, wait=True):
        if self.fail:
            raise TfhelmError("install failed")
        self.installed[(namespace, release)] = (chart, values)

    def uninstall(self, release, namespace, wait=True):
        return self.installed.pop((namespace, release), None) is not None


def fake_kube(core, applied=None):
    return SimpleNamespace(core=core, ping=lambda: "v1.36.3",
                           server_side_apply=lambda obj: (applied if applied is not None else []).append(obj))


def test_add_makes_namespace_and_token_and_never_passes_the_token_to_helm():
    core, helm, applied = FakeCore(), FakeHelm(), []
    userenv.add(UserOptions("alice"), helm, fake_kube(core, applied))
    # The cluster-wide fence on Services comes first: the policy and its binding.
    assert [(o["kind"], o["metadata"]["name"]) for o in applied] == [
        ("ValidatingAdmissionPolicy", userenv.POLICY), ("ValidatingAdmissionPolicyBinding", userenv.POLICY)]
    ns = "tfhelm-user-alice"
    token = base64.b64decode(core.secrets[(ns, users.token_secret())].data["token"]).decode()
    assert len(token) >= 40
    chart, values = helm.installed[(ns, users.RELEASE)]
    assert chart == "user-env" and token not in repr(values)
    userenv.add(UserOptions("alice", quota_cpu="2"), helm, fake_kube(core))  # again: upgrade
    assert base64.b64decode(core.secrets[(ns, users.token_secret())].data["token"]).decode() == token


def test_failed_first_install_leaves_no_namespace():
    core = FakeCore()
    with pytest.raises(TfhelmError):
        userenv.add(UserOptions("alice"), FakeHelm(fail=True), fake_kube(core))
    assert core.calls == ["create namespace tfhelm-user-alice", "delete namespace tfhelm-user-alice"]


def test_add_refuses_a_namespace_that_is_not_the_users():
    foreign = SimpleNamespace(metadata=SimpleNamespace(labels={"team": "x"}), status=None)
    core = FakeCore({"tfhelm-user-alice": foreign})
    with pytest.raises(TfhelmError, match="not the workspace of user alice"):
        userenv.add(UserOptions("alice"), FakeHelm(), fake_kube(core))


def test_remove_keeps_the_namespace_unless_purge():
    core, helm = FakeCore(), FakeHelm()
    userenv.add(UserOptions("alice"), helm, fake_kube(core))
    assert userenv.remove("alice", helm, fake_kube(core))
    assert "tfhelm-user-alice" in core.namespaces and not core.secrets and not helm.installed
    assert userenv.remove("alice", helm, fake_kube(core), purge=True)
    assert "tfhelm-user-alice" not in core.namespaces
    assert not userenv.remove("alice", helm, fake_kube(core))


def test_a_wheel_directory_on_the_users_code_volume_is_their_file_servers_url():
    assert users.files_dir_url("alice", "wheels", "--pip-find-links") == \
        "http://user-env-files.tfhelm-user-alice.svc:8080/wheels/"
    assert users.files_dir_url("alice", "deps/wheels/", "--pip-find-links").endswith(":8080/deps/wheels/")
    assert users.files_dir_url("alice", "/data/wheels", "--pip-find-links") == "/data/wheels"
    assert users.files_dir_url("alice", "https://w.example/", "--pip-find-links") == "https://w.example/"
    with pytest.raises(SpecError, match="--pip-find-links: '../x' is not a path on the code volume"):
        users.files_dir_url("alice", "../x", "--pip-find-links")
