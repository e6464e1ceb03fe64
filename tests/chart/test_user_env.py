"""The user-env chart, rendered by the real `helm template`, and `tfhelm user add --dry-run`."""

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tfhelm.chart import chart_path, default_values
from tfhelm.cli import app
from tfhelm.cluster.manifests import by_kind
from tfhelm.errors import RenderError
from tfhelm.workspace import userspec
from tfhelm_dev import localcluster

from .conftest import helm, kinds, pod_specs, render

NS = userspec.user_namespace("alice")


def env_render(values: dict | None = None, release: str = userspec.RELEASE) -> list[dict]:
    return render(values or {}, release=release, namespace=NS, chart=userspec.CHART)


def named(manifests: list[dict], kind: str, name: str) -> dict:
    return next(m for m in by_kind(manifests, kind) if m["metadata"]["name"] == name)


@pytest.fixture
def env_chart():
    return str(chart_path(userspec.CHART))


def test_helm_lint_is_clean(env_chart):
    result = helm("lint", "--strict", env_chart, "--namespace", NS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_default_workspace_objects():
    assert kinds(env_render(userspec.compute_user_values(userspec.UserOptions("alice")))) == [
        ("ConfigMap", "user-env-files"), ("ConfigMap", "user-env-tensorboard"),
        ("Deployment", "user-env-files"), ("Deployment", "user-env-notebook"),
        ("Deployment", "user-env-tensorboard"),
        ("LimitRange", "user-env"),
        ("NetworkPolicy", "user-env-notebook-exposed"), ("NetworkPolicy", "user-env-same-namespace"),
        ("NetworkPolicy", "user-env-tensorboard-exposed"),
        ("PersistentVolumeClaim", "user-env-code"), ("PersistentVolumeClaim", "user-env-data"),
        ("PersistentVolumeClaim", "user-env-logs"),
        ("ResourceQuota", "user-env"), ("ResourceQuota", "user-env-priority-classes"),
        ("Role", "user-env-notebook"), ("RoleBinding", "user-env-notebook"),
        ("Service", "user-env-files"), ("Service", "user-env-notebook"), ("Service", "user-env-tensorboard"),
        ("ServiceAccount", "user-env-notebook")]


def test_python_names_agree_with_the_chart():
    m = env_render()
    # Without userName (plain helm), the user comes from the namespace tfhelm names.
    assert {o["metadata"]["labels"][userspec.USER_LABEL] for o in m} == {"alice"}
    for component in ("notebook", "tensorboard", "files"):
        named(m, "Deployment", userspec.component_name(component))
        named(m, "Service", userspec.component_name(component))
    for volume in ("code", "logs", "data"):
        named(m, "PersistentVolumeClaim", userspec.claim_name(volume))
    named(m, "ServiceAccount", userspec.service_account())
    files = named(m, "Service", userspec.component_name("files"))
    assert userspec.files_url("alice") == \
        f"http://{files['metadata']['name']}.{NS}.svc:{files['spec']['ports'][0]['port']}/"
    notebook = pod_specs(m)[userspec.component_name("notebook")]
    token = next(v for v in notebook["volumes"] if v["name"] == "token")["secret"]
    assert token["secretName"] == userspec.token_secret()
    assert token["items"] == [{"key": userspec.TOKEN_KEY, "path": "token"}]
    env = {e["name"]: e.get("value") for e in notebook["containers"][0]["env"]}
    assert env["TFHELM_FILES_URL"] == userspec.files_url("alice")


def test_every_pod_runs_on_the_user_node_of_the_local_cluster():
    key, value = localcluster.USER_NODE_LABEL
    for name, pod in pod_specs(env_render()).items():
        assert pod["nodeSelector"] == {key: value}, name
        assert pod["tolerations"] == [{**localcluster.USER_NODE_TAINT, "operator": "Equal"}], name


def test_node_port_services_answer_only_on_the_pods_node():
    m = env_render({"notebook": {"service": {"nodePort": 30088}},
                    "tensorboard": {"service": {"type": "LoadBalancer"}}})
    notebook, tensorboard, files = (named(m, "Service", userspec.component_name(c))
                                    for c in ("notebook", "tensorboard", "files"))
    assert notebook["spec"]["type"] == "NodePort" and notebook["spec"]["ports"][0]["nodePort"] == 30088
    assert notebook["spec"]["externalTrafficPolicy"] == "Local"
    assert tensorboard["spec"]["externalTrafficPolicy"] == "Local"
    assert files["spec"]["type"] == "ClusterIP" and "externalTrafficPolicy" not in files["spec"]
    for svc in (notebook, tensorboard, files):
        assert set(svc["spec"]["selector"]) == {"app.kubernetes.io/name", "app.kubernetes.io/instance",
                                                "app.kubernetes.io/component"}


def test_network_policy_admits_only_the_namespace_and_the_exposed_ports():
    m = env_render()
    same = named(m, "NetworkPolicy", "user-env-same-namespace")["spec"]
    assert same == {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]}
    pods = {d["metadata"]["name"]: d["spec"]["template"] for d in by_kind(m, "Deployment")}
    for component in ("notebook", "tensorboard"):
        spec = named(m, "NetworkPolicy", f"user-env-{component}-exposed")["spec"]
        assert spec["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}]}]
        pod = pods[userspec.component_name(component)]
        assert spec["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        assert [p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])] == ["http"]
    # The file server is only for the namespace's own training tasks.
    assert not any("files" in p["metadata"]["name"] for p in by_kind(m, "NetworkPolicy"))


def test_tensorboard_answers_only_through_its_login_proxy():
    m = env_render()
    pod = named(m, "Deployment", userspec.component_name("tensorboard"))["spec"]["template"]["spec"]
    tensorboard, proxy = pod["containers"]
    # TensorBoard listens on loopback only; the proxy holds the Service's port and the token.
    assert "--host=127.0.0.1" in tensorboard["command"] and "ports" not in tensorboard
    assert proxy["name"] == "auth" and proxy["ports"] == [{"name": "http", "containerPort": 6006}]
    assert proxy["command"][:2] == ["python3", "/etc/tfhelm-auth/authproxy.py"]
    assert proxy["readinessProbe"]["httpGet"]["path"] == "/tfhelm-auth/ready"
    token = next(v for v in pod["volumes"] if v["name"] == "token")["secret"]
    assert token["secretName"] == userspec.token_secret()
    data = named(m, "ConfigMap", userspec.component_name("tensorboard"))["data"]
    shipped = chart_path(userspec.CHART) / "files" / "authproxy"  # tfhelm/pod/authproxy.py and what it imports
    assert data == {p.name: p.read_text() for p in shipped.iterdir()}
    assert {"authproxy.py", "tfhelm.pod.authproxy.py", "tfhelm.pod.httpd.py"} <= set(data)
    # Without it, as before: TensorBoard itself on the port, and no token in the pod.
    off = named(env_render({"tensorboard": {"auth": {"enabled": False}}}), "Deployment",
                userspec.component_name("tensorboard"))["spec"]["template"]["spec"]
    assert [c["name"] for c in off["containers"]] == ["tensorboard"]
    assert "--host=0.0.0.0" in off["containers"][0]["command"]
    assert not any(v["name"] == "token" for v in off["volumes"])


def test_the_fence_outlives_the_release_and_the_service_policy_selects_user_namespaces():
    m = env_render()
    for kind in ("NetworkPolicy", "ResourceQuota", "LimitRange"):
        for obj in by_kind(m, kind):
            assert obj["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", obj["metadata"]["name"]
    # The fence's NetworkPolicies carry the label the cluster-wide policy guards them by.
    assert {p["metadata"]["labels"]["tfhelm.io/fence"] for p in by_kind(m, "NetworkPolicy")} == {"workspace"}
    docs = userspec.cluster_policies()
    policies = {o["metadata"]["name"]: o for o in docs if o["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {o["metadata"]["name"]: o for o in docs if o["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert set(policies) == set(bindings) == set(userspec.policy_names()) == {
        "tfhelm-user-services", "tfhelm-user-release-records", "tfhelm-user-network-policies",
        "tfhelm-user-node"}
    assert docs[-2]["metadata"]["name"] == "tfhelm-user-services"  # applied last: its enforcement is awaited
    for name, binding in bindings.items():
        assert binding["spec"]["policyName"] == name and binding["spec"]["validationActions"] == ["Deny"]
        selector = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        assert selector == [{"key": userspec.USER_LABEL, "operator": "Exists"}]
        assert policies[name]["spec"]["failurePolicy"] == "Fail"
    assert userspec.USER_LABEL in userspec.namespace_labels("alice")


def test_network_policy_follows_exposure():
    internal = {"service": {"type": "ClusterIP"}}
    m = env_render({"notebook": internal, "tensorboard": internal})
    assert [p["metadata"]["name"] for p in by_kind(m, "NetworkPolicy")] == ["user-env-same-namespace"]
    peers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]
    m = env_render({"notebook": {**internal, "ingress": {"enabled": True, "host": "nb.example.org"}},
                    "tensorboard": internal, "networkPolicy": {"exposedFrom": peers}})
    exposed = named(m, "NetworkPolicy", "user-env-notebook-exposed")["spec"]["ingress"][0]
    assert exposed["from"] == peers
    assert not by_kind(env_render({"networkPolicy": {"enabled": False}}), "NetworkPolicy")


def test_the_platforms_prometheus_may_scrape_the_task_pods_metrics_port_only():
    """User namespaces shut other namespaces out; `networkPolicy.metricsFrom` lets the
    monitoring namespace reach the `metrics` port (tf-cluster's `metrics.port`, by name) of TF
    cluster pods, and nothing else."""
    assert "user-env-metrics" not in [p["metadata"]["name"] for p in by_kind(env_render(), "NetworkPolicy")]
    peers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    spec = named(env_render({"networkPolicy": {"metricsFrom": peers}}), "NetworkPolicy", "user-env-metrics")["spec"]
    assert spec["podSelector"] == {"matchExpressions": [{"key": "tfhelm.io/cluster", "operator": "Exists"}]}
    assert spec["ingress"] == [{"ports": [{"port": "metrics", "protocol": "TCP"}], "from": peers}]
    from tfhelm.cluster.manifests import render as render_chart
    task_pods = [m["spec"]["template"] for m in render_chart({}, "mnist", "team-a") if m["kind"] in ("Job", "Deployment")]
    assert task_pods and all("tfhelm.io/cluster" in t["metadata"]["labels"] for t in task_pods)
    assert all("metrics" in [p["name"] for c in t["spec"]["containers"] for p in c.get("ports", [])] for t in task_pods)


def restricted_violations(pod: dict) -> list[str]:
    """Pod Security Standards "restricted", as far as the pod spec shows it."""
    sc = pod.get("securityContext", {})
    bad = [k for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]
    bad += [f"volume {v['name']}" for v in pod.get("volumes", []) if "hostPath" in v]
    if sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        bad.append("seccompProfile")
    for c in pod.get("initContainers", []) + pod["containers"]:
        csc = c.get("securityContext", {})
        if csc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{c['name']}: allowPrivilegeEscalation")
        if csc.get("capabilities", {}).get("drop") != ["ALL"] or csc.get("capabilities", {}).get("add"):
            bad.append(f"{c['name']}: capabilities")
        if not csc.get("runAsNonRoot", sc.get("runAsNonRoot")) or csc.get("runAsUser", sc.get("runAsUser")) == 0:
            bad.append(f"{c['name']}: runAsNonRoot")
        if csc.get("privileged") or c.get("ports", [{}])[0].get("hostPort"):
            bad.append(f"{c['name']}: privileged or hostPort")
    return bad


def test_pods_are_restricted_and_mount_tokens_only_where_needed():
    specs = pod_specs(env_render())
    for name, pod in specs.items():
        assert restricted_violations(pod) == [], name
        assert pod["enableServiceLinks"] is False
        assert all(c["securityContext"]["readOnlyRootFilesystem"] for c in pod["containers"])
    assert specs["user-env-notebook"]["automountServiceAccountToken"] is True
    assert specs["user-env-notebook"]["serviceAccountName"] == userspec.service_account()
    assert specs["user-env-tensorboard"]["automountServiceAccountToken"] is False
    assert specs["user-env-files"]["automountServiceAccountToken"] is False
    no_rbac = pod_specs(env_render({"rbac": {"create": False}}))["user-env-notebook"]
    assert no_rbac["automountServiceAccountToken"] is False and "serviceAccountName" not in no_rbac


def test_the_token_is_read_from_a_secret_and_never_rendered():
    values = userspec.compute_user_values(userspec.UserOptions("alice", quota_cpu="4", node_port=30088))
    assert "token" not in yaml.safe_dump(values)
    m = env_render(values)
    assert by_kind(m, "Secret") == []
    notebook = pod_specs(m)["user-env-notebook"]["containers"][0]
    env = {e["name"]: e for e in notebook["env"]}
    assert "JUPYTER_TOKEN" not in env and env["JUPYTER_TOKEN_FILE"]["value"] == "/etc/jupyter-token/token"
    assert {"name": "token", "mountPath": "/etc/jupyter-token", "readOnly": True} in notebook["volumeMounts"]
    gitops = pod_specs(env_render({"notebook": {"token": {"existingSecret": "sealed", "existingSecretKey": "t"}}}))
    token = next(v for v in gitops["user-env-notebook"]["volumes"] if v["name"] == "token")["secret"]
    assert token["secretName"] == "sealed" and token["items"] == [{"key": "t", "path": "token"}]


def test_notebook_tensorboard_and_file_server_share_the_users_volumes():
    specs = pod_specs(env_render())
    mounts = {name: {m["name"]: m for m in pod["containers"][0]["volumeMounts"]} for name, pod in specs.items()}
    claims = {name: {v["name"]: v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
              for name, pod in specs.items()}
    assert claims["user-env-notebook"] == {v: {"claimName": userspec.claim_name(v)} for v in ("code", "logs", "data")}
    assert mounts["user-env-notebook"]["code"]["mountPath"] == "/home/jovyan/work"
    assert "--notebook-dir=/home/jovyan/work" in specs["user-env-notebook"]["containers"][0]["args"]
    # TensorBoard reads the logdir tf-cluster's tasks write under (<logs>/<cluster>).
    tf_logs = default_values("tf-cluster")["storage"]["logs"]["mountPath"]
    assert mounts["user-env-tensorboard"]["logs"] == {"name": "logs", "mountPath": tf_logs, "readOnly": True}
    assert f"--logdir={tf_logs}" in specs["user-env-tensorboard"]["containers"][0]["command"]
    assert claims["user-env-tensorboard"] == {"logs": {"claimName": "user-env-logs", "readOnly": True}}
    assert mounts["user-env-files"]["code"] == {"name": "code", "mountPath": "/srv/code", "readOnly": True}
    assert claims["user-env-files"] == {"code": {"claimName": "user-env-code", "readOnly": True}}


def test_file_server_is_stock_nginx_serving_read_only_listings():
    m = env_render()
    files = pod_specs(m)["user-env-files"]["containers"][0]
    assert files["image"].startswith("nginxinc/nginx-unprivileged:")
    conf = named(m, "ConfigMap", "user-env-files")["data"]["nginx.conf"]
    assert "root /srv/code;" in conf and "autoindex on;" in conf and "limit_except GET" in conf
    assert "listen 8080;" in conf and files["ports"][0]["containerPort"] == 8080
    assert "/etc/tfhelm-files/nginx.conf" in files["command"]


def test_volumes_use_the_storage_class_or_existing_claims_and_are_kept():
    m = env_render({"storage": {"storageClassName": "nfs", "logs": {"storageClassName": "fast"},
                                "code": {"existingClaim": "my-code"}}})
    pvcs = {p["metadata"]["name"]: p for p in by_kind(m, "PersistentVolumeClaim")}
    assert sorted(pvcs) == ["user-env-data", "user-env-logs"]
    assert pvcs["user-env-data"]["spec"]["storageClassName"] == "nfs"
    assert pvcs["user-env-logs"]["spec"]["storageClassName"] == "fast"
    assert all(p["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for p in pvcs.values())
    code = next(v for v in pod_specs(m)["user-env-files"]["volumes"] if v["name"] == "code")
    assert code["persistentVolumeClaim"]["claimName"] == "my-code"
    no_data = env_render({"storage": {"data": {"enabled": False}}})
    assert "user-env-data" not in [p["metadata"]["name"] for p in by_kind(no_data, "PersistentVolumeClaim")]
    assert "data" not in [v["name"] for v in pod_specs(no_data)["user-env-notebook"]["volumes"]]


def test_quota_and_limit_range():
    values = userspec.compute_user_values(userspec.UserOptions(
        "alice", quota_cpu="6", quota_memory="24Gi", quota_gpus=2, quota_objects=["pods=40"], max_memory="16Gi"))
    values["quota"]["extraHard"] = {"requests.amd.com/gpu": "1"}
    m = env_render(values)
    hard = named(m, "ResourceQuota", "user-env")["spec"]["hard"]
    assert {k: hard[k] for k in ("requests.cpu", "requests.memory", "requests.storage", "persistentvolumeclaims",
                                 "requests.nvidia.com/gpu", "requests.amd.com/gpu", "pods")} == {
        "requests.cpu": "6", "requests.memory": "24Gi", "requests.storage": "500Gi",
        "persistentvolumeclaims": "20", "requests.nvidia.com/gpu": "2", "requests.amd.com/gpu": "1", "pods": "40"}
    # Every kind a tenant can make is counted; by default no GPU.
    assert {k for k in hard if k.startswith("count/")} == {
        "count/configmaps", "count/secrets", "count/services", "count/deployments.apps", "count/jobs.batch",
        "count/leases.coordination.k8s.io", "count/serviceaccounts", "count/roles.rbac.authorization.k8s.io",
        "count/rolebindings.rbac.authorization.k8s.io", "count/networkpolicies.networking.k8s.io"}
    assert named(env_render(), "ResourceQuota", "user-env")["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
    (limits,) = by_kind(m, "LimitRange")[0]["spec"]["limits"]
    assert limits == {"type": "Container", "default": {"cpu": "8", "memory": "2Gi"},
                      "defaultRequest": {"cpu": "100m", "memory": "256Mi"}, "max": {"cpu": "8", "memory": "16Gi"}}
    off = env_render({"quota": {"enabled": False}, "limitRange": {"enabled": False}})
    assert not by_kind(off, "ResourceQuota") and not by_kind(off, "LimitRange")


def test_no_pod_may_name_a_priority_class_that_was_not_granted():
    """A second quota admits no pod of any PriorityClass (the system-* ones too) but those
    granted; pods that name none are not in its scope."""
    scope = named(env_render(), "ResourceQuota", "user-env-priority-classes")["spec"]
    assert scope == {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "Exists"}]}}
    granted = userspec.compute_user_values(userspec.UserOptions("alice", priority_classes=["team-high", "batch"]))
    scope = named(env_render(granted), "ResourceQuota", "user-env-priority-classes")["spec"]
    assert scope["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "Exists"},
        {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["team-high", "batch"]}]


def test_role_reaches_only_the_namespace_and_not_its_fences():
    m = env_render()
    role = by_kind(m, "Role")[0]
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"] for v in rule["verbs"]}
    for need in [("", "secrets", "create"), ("apps", "deployments", "patch"), ("batch", "jobs", "delete"),
                 ("", "pods/log", "get"), ("", "persistentvolumeclaims", "create")]:
        assert need in granted
    assert not any("*" in (g, r, v) for g, r, v in granted)
    # Roles and RoleBindings are writable (the reaper's): the API server's escalation check
    # refuses any grant beyond this Role; tests/cluster proves widening it is forbidden.
    fences = {"resourcequotas", "limitranges", "namespaces"}
    assert not {(r, v) for _, r, v in granted if r in fences and v not in ("get", "list", "watch")}
    # NetworkPolicies (tf-cluster fences each TF cluster): the workspace's own are guarded by
    # the cluster-wide tfhelm-user-network-policies (tests/cluster and tests/realpods try it).
    assert ("networking.k8s.io", "networkpolicies", "create") in granted
    assert not by_kind(m, "ClusterRole") and not by_kind(m, "ClusterRoleBinding")
    binding = by_kind(m, "RoleBinding")[0]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": userspec.service_account()}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": userspec.service_account(), "namespace": NS}]
    assert by_kind(m, "ServiceAccount")[0]["automountServiceAccountToken"] is False


def test_ingress_for_notebook_and_tensorboard():
    m = env_render({"notebook": {"ingress": {"enabled": True, "host": "nb.example.org", "className": "nginx",
                                             "tls": [{"hosts": ["nb.example.org"], "secretName": "nb-tls"}]}},
                    "tensorboard": {"ingress": {"enabled": True}}})
    nb, tb = named(m, "Ingress", "user-env-notebook"), named(m, "Ingress", "user-env-tensorboard")
    assert nb["spec"]["ingressClassName"] == "nginx" and nb["spec"]["tls"][0]["secretName"] == "nb-tls"
    assert nb["spec"]["rules"][0]["host"] == "nb.example.org"
    backend = tb["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "user-env-tensorboard", "port": {"number": 6006}} and "host" not in tb["spec"]["rules"][0]


def test_a_users_tf_cluster_mounts_the_users_volumes_and_downloads_from_the_file_server():
    values = userspec.cluster_values_for_user("alice", "models/train.py")
    m = render({**values, "worker": {"replicas": 2}}, release="mnist", namespace=NS)
    worker = pod_specs(m)["mnist-worker"]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in worker["volumes"]
              if "persistentVolumeClaim" in v}
    assert claims == {"logs": "user-env-logs", "data": "user-env-data"}
    assert not by_kind(m, "PersistentVolumeClaim")
    fetch = worker["initContainers"][0]["command"]
    assert fetch[2] == f"http://user-env-files.{NS}.svc:8080/models/train.py"
    env = {e["name"]: e.get("value") for e in worker["containers"][0]["env"]}
    assert env["TFHELM_LOG_DIR"] == "/log/mnist"  # TensorBoard's --logdir=/log sees run "mnist"


def test_rendering_is_deterministic_and_uses_no_random_functions(env_chart):
    args = ("template", userspec.RELEASE, env_chart, "-n", NS, "--set", "userName=alice")
    first, second = helm(*args), helm(*args)
    assert first.returncode == 0 and first.stdout == second.stdout
    for path in Path(env_chart, "templates").rglob("*.*"):
        text = path.read_text()
        for fn in ("randAlphaNum", "randAlpha", "randNumeric", "randAscii", "uuidv4", "lookup", " now",
                   "genPrivateKey"):
            assert fn not in text, f"{path.name} uses {fn}"


@pytest.mark.parametrize("values,message", [
    ({"notebook": {"bogus": 1}}, "additional properties 'bogus' not allowed"),
    ({"notebook": {"service": {"type": "ExternalName"}}}, "notebook.service.type: value must be one of"),
    ({"tensorboard": {"service": {"nodePort": 80}}}, "tensorboard.service.nodePort: minimum"),
    ({"storage": {"logs": {"size": "lots"}}}, "storage.logs.size: 'lots' is not a Kubernetes quantity"),
    ({"storage": {"code": {"enabled": False}}}, "storage.code: additional properties 'enabled'"),
    ({"quota": {"cpu": "many"}}, "quota.cpu: 'many' is not a Kubernetes quantity"),
    ({"userName": "Alice"}, "userName: 'Alice' is not a user name"),
    ({"notebook": {"token": {"value": "s3cret"}}}, "additional properties 'value' not allowed"),
    ({"quota": {"priorityClasses": ["system-node-critical"]}}, "quota.priorityClasses.0"),
    ({"quota": {"gpus": -1}}, "quota.gpus: minimum"),
    ({"quota": {"objects": {"requests.cpu": "4"}}}, "quota.objects: additional properties 'requests.cpu'"),
    ({"networkPolicy": {"metricsFrom": [{"namespace": "monitoring"}]}}, "additional properties 'namespace'"),
])
def test_schema_rejects_bad_values(values, message):
    with pytest.raises(RenderError, match=message):
        env_render(values)


@pytest.mark.parametrize("values,release,message", [
    ({"codeServer": {"service": {"nodePort": 30001}}}, userspec.RELEASE, "type is ClusterIP"),
    ({"notebook": {"service": {"nodePort": 30001}}, "tensorboard": {"service": {"nodePort": 30001}}},
     userspec.RELEASE, "each Service needs its own node port"),
    ({}, "a" * 52, "use at most 51"),
    ({}, "1st", "starting with a letter"),
])
def test_invalid_combinations_fail_the_render(values, release, message):
    with pytest.raises(RenderError, match=message):
        env_render(values, release=release)


runner = CliRunner()


def test_user_add_dry_run_prints_the_workspace_without_a_cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    result = runner.invoke(app, ["user", "add", "bob", "--dry-run", "--quota-cpu", "4", "--node-port", "30100"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    # The cluster-wide policies that `user add` applies, then the workspace itself.
    assert [d["kind"] for d in docs if "tfhelm.io/user" not in d["metadata"]["labels"]] == [
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * len(userspec.policy_names())
    docs = [d for d in docs if "tfhelm.io/user" in d["metadata"]["labels"]]
    assert {d["metadata"]["labels"]["tfhelm.io/user"] for d in docs} == {"bob"}
    assert named(docs, "Service", "user-env-notebook")["spec"]["ports"][0]["nodePort"] == 30100
    assert by_kind(docs, "ResourceQuota")[0]["spec"]["hard"]["requests.cpu"] == "4"


@pytest.mark.parametrize("args,field", [
    (["add", "Bob"], "NAME"), (["add", "b" * 52], "NAME"), (["add", "bob", "--node-port", "80"], "--node-port"),
    (["add", "bob", "--quota-memory", "lots"], "--quota-memory"),
    (["add", "bob", "--storage-class", "Fast_SSD"], "--storage-class"),
    (["url", "Bob"], "NAME"), (["remove", "-x"], None),
])
def test_user_bad_input_exits_2_with_one_line(args, field, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    result = runner.invoke(app, ["user", *args, "--dry-run"] if args[0] == "add" else ["user", *args])
    assert result.exit_code == 2, result.output
    if field:
        assert result.stderr.startswith(f"error: {field}:") and result.stderr.count("\n") == 1


def test_user_remove_knows_every_kind_the_workspace_makes():
    """`tfhelm user remove` deletes the workspace by label, kind by kind (never from its
    record): every kind any values render is one it deletes or keeps."""
    from tfhelm.workspace.actions import WORKSPACE_KINDS

    made = env_render({"notebook": {"ingress": {"enabled": True}}, "tensorboard": {"ingress": {"enabled": True}},
                       "networkPolicy": {"metricsFrom": [{"podSelector": {}}]}})
    assert {o["kind"] for o in made} <= set(WORKSPACE_KINDS)
    assert {o["metadata"]["labels"]["app.kubernetes.io/instance"] for o in made} == {userspec.RELEASE}
