"""Conventions users of popular charts expect, on the real `helm template` output:
name overrides, annotations, chart-wide placement, the task ServiceAccount, `enabled` for
umbrella charts, `global.imageRegistry`, kubeVersion and the `helm test` hook."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from tfhelm.chart import chart_path
from tfhelm.cluster.manifests import by_kind, cluster_config, job_names
from tests.helpers.pods import task_tf_configs
from tfhelm.cluster.spec import cluster_spec
from tfhelm.cluster.values import shape_of

from .conftest import helm, render

FULL = {"ps": {"replicas": 2}, "worker": {"replicas": 2}, "chief": {"enabled": True},
        "evaluator": {"enabled": True}, "reaper": {"enabled": True},
        "code": {"source": "url", "url": "http://files/train.py", "script": "train.py"}}


def pods(manifests):
    """(kind/name, pod spec, pod metadata) of every pod the release makes, the test hook included."""
    for m in manifests:
        if m["kind"] in ("Job", "Deployment"):
            yield f"{m['kind']}/{m['metadata']['name']}", m["spec"]["template"]["spec"], m["spec"]["template"]["metadata"]
        elif m["kind"] == "Pod":
            yield f"Pod/{m['metadata']['name']}", m["spec"], m["metadata"]


def test_name_overrides():
    m = render({**FULL, "nameOverride": "training", "fullnameOverride": "big"}, release="rel")
    for obj in m:
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "training"
    assert {d["metadata"]["name"] for d in by_kind(m, "Deployment")} == {"big-ps-0", "big-ps-1", "big-reaper"}
    configs = task_tf_configs([o for o in m if o["metadata"]["name"] != "big-reaper"])
    generation = cluster_config(m)[1]
    assert configs[("worker", 1)]["cluster"] == cluster_spec("big", "team-a", shape_of(FULL), 2222,
                                                             "cluster.local", generation)
    assert configs[("worker", 1)]["cluster"]["ps"][0] == "big-ps-0.team-a.svc.cluster.local:2222"
    # clusterName wins over fullnameOverride
    named = render({"clusterName": "c", "fullnameOverride": "big"})
    assert {j["metadata"]["name"] for j in by_kind(named, "Job")} == {f"c-worker-{cluster_config(named)[1]}"}


def test_common_annotations_on_every_object_and_pvcs_still_kept():
    m = render({**FULL, "commonAnnotations": {"team": "vision"}, "serviceAccount": {"create": True},
                "storage": {"storageClass": {"create": True, "provisioner": "nfs.csi.k8s.io"}}})
    kinds = {o["kind"] for o in m}
    assert {"ConfigMap", "Deployment", "Service", "Job", "PersistentVolumeClaim", "StorageClass",
            "ServiceAccount", "Role", "RoleBinding", "Pod"} <= kinds
    for obj in m:
        assert obj["metadata"]["annotations"]["team"] == "vision", obj["metadata"]["name"]
    for pvc in by_kind(m, "PersistentVolumeClaim"):
        assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_chart_wide_placement_and_pod_annotations_with_role_overrides():
    tol = [{"key": "tf", "operator": "Exists", "effect": "NoSchedule"}]
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    m = render({**FULL, "nodeSelector": {"pool": "tf"}, "tolerations": tol, "affinity": aff,
                "podAnnotations": {"a": "chart", "b": "chart"},
                "worker": {"replicas": 2, "nodeSelector": {"pool": "gpu"}, "podAnnotations": {"b": "worker"}}})
    jobs = {role: f"Job/{name}" for role, name in job_names(m).items()}  # named by generation
    seen = set()
    for name, spec, meta in pods(m):
        seen.add(name)
        want = {"pool": "gpu"} if name == jobs["worker"] else {"pool": "tf"}
        assert spec["nodeSelector"] == want, name
        # The chart's node-failure tolerations come after (tests/chart/test_node_failure.py).
        assert spec["tolerations"][:1] == tol and spec["affinity"] == aff, name
        if name != "Pod/mnist-test":
            want_b = "worker" if name == jobs["worker"] else "chart"
            assert meta["annotations"]["a"] == "chart" and meta["annotations"]["b"] == want_b, name
    assert {jobs["worker"], jobs["chief"], jobs["evaluator"], "Deployment/mnist-ps-0",
            "Deployment/mnist-reaper", "Pod/mnist-test"} <= seen


def test_service_account_created_or_named_and_its_token_never_mounted():
    m = render({**FULL, "serviceAccount": {"create": True, "annotations": {"iam.gke.io/gcp-service-account": "x@y"}}})
    (sa,) = [s for s in by_kind(m, "ServiceAccount") if s["metadata"]["name"] == "mnist"]
    assert sa["automountServiceAccountToken"] is False
    assert sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == "x@y"
    for name, spec, _ in pods(m):
        if name in ("Deployment/mnist-reaper", "Pod/mnist-test"):
            continue  # the reaper has its own account; the test pod needs none
        assert spec["serviceAccountName"] == "mnist" and spec["automountServiceAccountToken"] is False, name
    existing = render({"serviceAccount": {"name": "team-sa"}})
    assert [s["metadata"]["name"] for s in by_kind(existing, "ServiceAccount")] == ["mnist-reaper"]
    tasks = [(n, spec) for n, spec, _ in pods(existing) if n not in ("Pod/mnist-test", "Deployment/mnist-reaper")]
    assert {spec.get("serviceAccountName") for _, spec in tasks} == {"team-sa"}
    default = render()
    assert all("serviceAccountName" not in spec for n, spec, _ in pods(default) if n != "Deployment/mnist-reaper")


def test_global_image_registry_prefixes_every_image():
    m = render({**FULL, "global": {"imageRegistry": "mirror.example:5000"}})
    images = [c["image"] for _, spec, _ in pods(m)
              for c in spec.get("initContainers", []) + spec["containers"]]
    assert len(images) >= 8
    assert all(i.startswith("mirror.example:5000/") for i in images), images
    assert "mirror.example:5000/tensorflow/tensorflow:2.21.0" in images


def test_enabled_is_accepted_and_an_umbrella_condition_switches_the_chart(tmp_path):
    assert render({"enabled": False})  # the schema accepts it
    umbrella = tmp_path / "platform"
    (umbrella / "charts").mkdir(parents=True)
    shutil.copytree(chart_path("tf-cluster"), umbrella / "charts" / "tf-cluster")
    (umbrella / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "platform", "version": "1.0.0",
        "dependencies": [{"name": "tf-cluster", "version": "*", "condition": "tf-cluster.enabled"}]}))
    on = helm("template", "p", str(umbrella), "--set", "tf-cluster.clusterName=mnist")
    assert on.returncode == 0, on.stderr
    assert "name: mnist-worker" in on.stdout
    off = helm("template", "p", str(umbrella), "--set", "tf-cluster.enabled=false")
    assert off.returncode == 0, off.stderr
    assert "kind:" not in off.stdout


@pytest.mark.parametrize("version,ok", [("1.29.0", True), ("1.36.3", True), ("1.28.9", False)])
def test_kube_version(tf_chart, version, ok):
    res = helm("template", "m", tf_chart, "--kube-version", version)
    assert (res.returncode == 0) == ok, res.stderr
    if not ok:
        assert "kubeVersion" in res.stderr or "incompatible" in res.stderr


def test_helm_test_hook_pod_is_restricted_and_reads_the_release_spec():
    m = render(FULL)
    (pod,) = by_kind(m, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec = pod["spec"]
    c = spec["containers"][0]
    assert c["command"][:2] == ["python3", "/etc/tfhelm/helm-test.py"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False and spec["securityContext"]["runAsNonRoot"]
    assert spec["automountServiceAccountToken"] is False
    (cm,) = [x for x in by_kind(m, "ConfigMap") if x["metadata"]["name"] == "mnist-tfconfig"]
    assert spec["volumes"][0]["configMap"]["name"] == "mnist-tfconfig"
    assert {"helm-test.py", "launcher.py", "cluster-spec.json"} <= set(cm["data"])
    assert not by_kind(render({"test": {"enabled": False}}), "Pod")
    assert not by_kind(render({**FULL, "components": "ps"}, release="mnist-ps"), "Pod")  # the workload release tests


def _run_hook(tmp_path, cluster: dict, files: dict, timeout="1"):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "cluster-spec.json").write_text(json.dumps(cluster))
    env = {"TFHELM_CLUSTER_SPEC_FILE": str(tmp_path / "cluster-spec.json"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(tmp_path / "helm-test.py"), timeout], env=env,
                          capture_output=True, text=True, timeout=60)


def test_helm_test_script_checks_tf_config_and_dns(tmp_path):
    """The hook's script, exactly as the chart ships it, run here against names that do and
    do not resolve (in a real cluster they are the tasks' Service and pod names)."""
    (cm,) = [x for x in by_kind(render(FULL), "ConfigMap") if x["metadata"]["name"] == "mnist-tfconfig"]
    files = {k: v for k, v in cm["data"].items() if k not in ("cluster-spec.json", "generation")}  # its modules
    ok = _run_hook(tmp_path, {"ps": {"count": 2, "host": "localhost:222{index}"},
                              "worker": ["localhost:2223", "127.0.0.1:2224"]}, files)
    assert ok.returncode == 0, ok.stderr
    assert "TF_CONFIG valid for 4 task(s)" in ok.stdout and "OK: every task's DNS name resolves" in ok.stdout
    bad = _run_hook(tmp_path, {"ps": ["localhost:2222"], "worker": ["nope-worker-0.nope.invalid:2222"]}, files)
    assert bad.returncode == 1 and "FAIL: 1 host(s) do not resolve" in bad.stderr
    assert "nope-worker-0.nope.invalid:2222" in bad.stderr
    broken = _run_hook(tmp_path, {"bogus": ["localhost:1"]}, files)
    assert broken.returncode != 0 and "unknown task type 'bogus'" in broken.stderr


def test_user_env_conventions():
    m = render({"notebook": {"token": {"existingSecret": "tok"}, "podAnnotations": {"b": "notebook"}},
                "commonAnnotations": {"team": "vision"}, "podAnnotations": {"a": "chart", "b": "chart"},
                "global": {"imageRegistry": "mirror.example:5000"}, "nameOverride": "workspace",
                "enabled": True}, release="user-env", namespace="tfhelm-user-alice", chart="user-env")
    assert len(m) > 10
    for obj in m:
        assert obj["metadata"]["annotations"]["team"] == "vision", obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "workspace"
    for pvc in by_kind(m, "PersistentVolumeClaim"):
        assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    deps = {d["metadata"]["name"]: d["spec"]["template"] for d in by_kind(m, "Deployment")}
    assert deps["user-env-notebook"]["metadata"]["annotations"]["b"] == "notebook"
    tensorboard = deps["user-env-tensorboard"]["metadata"]["annotations"]
    assert {k: v for k, v in tensorboard.items() if not k.startswith("checksum/")} == {"a": "chart", "b": "chart"}
    images = [c["image"] for t in deps.values() for c in t["spec"]["containers"]]
    assert images and all(i.startswith("mirror.example:5000/") for i in images)
