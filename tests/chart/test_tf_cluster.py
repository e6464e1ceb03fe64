"""The tf-cluster chart, rendered by the real `helm template`."""

import gzip
import json

import pytest

from tfhelm.errors import RenderError
from tfhelm.manifests import by_kind, cluster_config, job_names
from tests.helpers.pods import task_tf_configs

from .conftest import helm, kinds, pod_specs, render


def test_helm_lint_is_clean(tf_chart):
    result = helm("lint", "--strict", tf_chart)
    assert result.returncode == 0, result.stdout + result.stderr


def test_default_install_is_one_ps_one_worker_and_volumes():
    assert kinds(render()) == [
        ("ConfigMap", "mnist-tfconfig"), ("Deployment", "mnist-ps-0"), ("Job", "mnist-worker"),
        ("PersistentVolumeClaim", "mnist-data"), ("PersistentVolumeClaim", "mnist-logs"),
        ("Pod", "mnist-test"),  # the `helm test` hook: installed only by `helm test`
        ("Service", "mnist-ps-0"), ("Service", "mnist-worker")]


def test_workers_are_one_indexed_job_and_one_headless_service():
    m = render({"worker": {"replicas": 8, "backoffLimit": 6, "activeDeadlineSeconds": 3600,
                           "ttlSecondsAfterFinished": 600}})
    (job,) = by_kind(m, "Job")
    assert job["spec"] | {"template": None} == {
        "completionMode": "Indexed", "completions": 8, "parallelism": 8,
        "podReplacementPolicy": "Failed", "backoffLimitPerIndex": 3, "backoffLimit": 6,
        "activeDeadlineSeconds": 3600, "ttlSecondsAfterFinished": 600, "template": None}
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == "mnist-worker" and pod["restartPolicy"] == "Never"
    svc = next(s for s in by_kind(m, "Service") if s["metadata"]["name"] == "mnist-worker")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert set(svc["spec"]["selector"]) == {"app.kubernetes.io/name", "app.kubernetes.io/instance",
                                            "app.kubernetes.io/component"}


def test_each_ps_task_is_a_deployment_and_service_selecting_only_its_pod():
    m = render({"ps": {"replicas": 3}})
    deployments = by_kind(m, "Deployment")
    assert [d["metadata"]["name"] for d in deployments] == ["mnist-ps-0", "mnist-ps-1", "mnist-ps-2"]
    for i, d in enumerate(deployments):
        assert d["spec"]["replicas"] == 1 and d["spec"]["strategy"] == {"type": "Recreate"}
        assert d["spec"]["selector"]["matchLabels"]["tfhelm.io/task-index"] == str(i)
        svc = next(s for s in by_kind(m, "Service") if s["metadata"]["name"] == f"mnist-ps-{i}")
        assert svc["spec"]["selector"] == d["spec"]["selector"]["matchLabels"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert all(labels[k] == v for k, v in svc["spec"]["selector"].items())


def test_task_index_is_declared_before_tf_config():
    """The Job controller appends JOB_COMPLETION_INDEX last: too late for $(...) expansion."""
    env = pod_specs(render())["mnist-worker"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert names.index("TFHELM_TASK_INDEX") < names.index("TF_CONFIG")
    assert env[0]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert "$(TFHELM_TASK_INDEX)" in next(e["value"] for e in env if e["name"] == "TF_CONFIG")


def test_every_task_gets_its_own_tf_config():
    m = render({"worker": {"replicas": 3}, "ps": {"replicas": 2}, "chief": {"enabled": True},
                "evaluator": {"enabled": True}})
    configs = task_tf_configs(m)
    assert sorted(configs) == [("chief", 0), ("evaluator", 0), ("ps", 0), ("ps", 1),
                               ("worker", 0), ("worker", 1), ("worker", 2)]
    for (role, index), cfg in configs.items():
        assert cfg["task"] == {"type": role, "index": index}
        assert cfg["cluster"]["worker"][2] == f"{job_names(m)['worker']}-2.mnist-worker.team-a.svc.cluster.local:2222"
    cluster_json = json.loads(by_kind(m, "ConfigMap")[0]["data"]["cluster.json"])
    assert all(cfg["cluster"] == cluster_json for cfg in configs.values())


def test_paths_for_data_logs_and_checkpoints():
    env = {e["name"]: e.get("value") for e in pod_specs(render())["mnist-worker"]["containers"][0]["env"]}
    assert env["TFHELM_DATA_DIR"] == "/data"
    assert env["TFHELM_LOG_DIR"] == "/log/mnist"
    assert env["TFHELM_CHECKPOINT_DIR"] == "/log/mnist/checkpoints"
    mounts = {v["name"]: v["mountPath"] for v in pod_specs(render())["mnist-worker"]["containers"][0]["volumeMounts"]}
    assert mounts["data"] == "/data" and mounts["logs"] == "/log"


def test_what_tasks_run_depends_on_mode():
    def args(values):
        return {n: s["containers"][0]["args"][0] for n, s in pod_specs(render(values)).items()}
    assert args({"chief": {"enabled": True}}) == {"mnist-ps-0": "server", "mnist-worker": "script",
                                                  "mnist-chief": "script"}
    assert args({"mode": "in-graph", "chief": {"enabled": True}}) == {
        "mnist-ps-0": "server", "mnist-worker": "server", "mnist-chief": "script"}


def test_every_pod_is_restricted_and_mounts_no_token():
    m = render({"chief": {"enabled": True}, "evaluator": {"enabled": True},
                "code": {"source": "url", "url": "http://files/t.py", "script": "t.py"}})
    for name, pod in pod_specs(m).items():
        assert pod["automountServiceAccountToken"] is False, name
        sc = pod["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod["containers"] + pod.get("initContainers", []):
            csc = c["securityContext"]
            assert csc["allowPrivilegeEscalation"] is False and csc["capabilities"] == {"drop": ["ALL"]}


def test_every_object_carries_standard_and_tf_labels():
    for obj in render({"chief": {"enabled": True}, "commonLabels": {"team": "vision"}}):
        labels = obj["metadata"]["labels"]
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                    "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "helm.sh/chart"):
            assert key in labels, (obj["kind"], key)
        assert labels["tfhelm.io/cluster"] == "mnist" and labels["team"] == "vision"
        assert labels["tfhelm.io/role"] == labels["app.kubernetes.io/component"]


def test_per_role_settings_reach_the_pod():
    m = render({"imagePullSecrets": [{"name": "regcred"}], "worker": {
        "gpus": 2, "nodeSelector": {"gpu": "a100"}, "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "affinity": {"podAntiAffinity": {}}, "priorityClassName": "training", "schedulerName": "volcano",
        "image": {"repository": "my/tf", "tag": "1"}, "env": [{"name": "EPOCHS", "value": "3"}],
        "extraVolumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
        "extraVolumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
        "podLabels": {"team": "x"}, "podAnnotations": {"a": "b"}}})
    job = by_kind(m, "Job")[0]
    pod = job["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert c["resources"]["limits"]["memory"] == "4Gi"
    assert pod["nodeSelector"] == {"gpu": "a100"} and pod["tolerations"][0]["key"] == "gpu"
    assert pod["priorityClassName"] == "training" and pod["schedulerName"] == "volcano"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}] and "podAntiAffinity" in pod["affinity"]
    assert c["image"] == "my/tf:1" and {"name": "EPOCHS", "value": "3"} in c["env"]
    assert {"name": "shm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert job["spec"]["template"]["metadata"]["labels"]["team"] == "x"
    ps = pod_specs(m)["mnist-ps-0"]
    assert ps["containers"][0]["image"] == "tensorflow/tensorflow:2.21.0" and "nodeSelector" not in ps


def test_custom_command_replaces_the_launcher():
    c = pod_specs(render({"worker": {"command": ["bash", "-c"], "args": ["python /app/x.py"]}}))[
        "mnist-worker"]["containers"][0]
    assert c["command"] == ["bash", "-c"] and c["args"] == ["python /app/x.py"]


def test_code_from_url_is_fetched_by_an_init_container_with_checksum():
    sha = "ab" * 32
    pod = pod_specs(render({"code": {"source": "url", "url": "http://files.team-a/train.py",
                                     "script": "train.py", "sha256": sha, "args": ["--epochs", "3"]}}))
    init = pod["mnist-worker"]["initContainers"][0]
    assert init["command"][2:] == ["http://files.team-a/train.py", "/opt/tfhelm/code/train.py", sha]
    assert pod["mnist-worker"]["containers"][0]["args"] == [
        "script", "/opt/tfhelm/code/train.py", "--epochs", "3"]
    assert "initContainers" not in pod["mnist-ps-0"]


def test_code_from_a_configmap_or_inline():
    pod = pod_specs(render({"code": {"source": "configMap", "configMap": "my-code", "script": "t.py"}}))
    assert {"name": "code", "configMap": {"name": "my-code"}} in pod["mnist-worker"]["volumes"]
    m = render({"code": {"source": "inline", "inline": "import util\n", "script": "t.py",
                         "extraFiles": {"util.py": "X = 1\n"}}})
    code = next(c for c in by_kind(m, "ConfigMap") if c["metadata"]["name"] == "mnist-code")
    assert code["data"] == {"t.py": "import util\n", "util.py": "X = 1\n"}


def test_storage_existing_claims_and_keep_policy():
    m = render({"storage": {"logs": {"existingClaim": "user-logs"}}})
    (pvc,) = by_kind(m, "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == "mnist-data"
    assert pvc["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName")
              for v in pod_specs(m)["mnist-worker"]["volumes"]}
    assert claims["logs"] == "user-logs" and claims["data"] == "mnist-data"


def test_storage_class_presets():
    m = render({"storage": {"storageClass": {"create": True, "name": "gluster", "preset": "glusterfs-heketi",
                                             "glusterfs": {"resturl": "http://heketi:8080"}}}})
    (sc,) = by_kind(m, "StorageClass")
    assert sc["provisioner"] == "kubernetes.io/glusterfs"
    assert sc["parameters"]["resturl"] == "http://heketi:8080" and sc["parameters"]["volumetype"] == "replicate:3"
    assert {p["spec"]["storageClassName"] for p in by_kind(m, "PersistentVolumeClaim")} == {"gluster"}
    m = render({"storage": {"storageClass": {"create": True, "provisioner": "nfs.csi.k8s.io",
                                             "parameters": {"server": "nfs", "share": "/x"}},
                            "data": {"storageClassName": "fast"}}})
    (sc,) = by_kind(m, "StorageClass")
    assert sc["provisioner"] == "nfs.csi.k8s.io" and sc["parameters"] == {"server": "nfs", "share": "/x"}
    assert sorted(p["spec"]["storageClassName"] for p in by_kind(m, "PersistentVolumeClaim")) == ["fast", "tfhelm"]


def test_split_releases_hold_disjoint_parts_with_the_same_tf_config():
    values = {"clusterName": "mnist", "worker": {"replicas": 3}, "ps": {"replicas": 2}, "chief": {"enabled": True}}
    whole = render(values)
    ps = render(values | {"components": "ps"}, release="mnist-ps")
    rest = render(values | {"components": "workload"}, release="mnist")
    assert {k for k in kinds(ps) if k[0] != "ConfigMap"} == {
        ("Deployment", "mnist-ps-0"), ("Deployment", "mnist-ps-1"), ("Service", "mnist-ps-0"), ("Service", "mnist-ps-1")}
    assert not {k for k in kinds(ps) if k[0] != "ConfigMap"} & set(kinds(rest))
    assert set(kinds(whole)) == {k for k in kinds(ps) + kinds(rest) if k[1] != "mnist-ps-tfconfig"}
    assert task_tf_configs(ps) | task_tf_configs(rest) == task_tf_configs(whole)


def test_rendering_is_deterministic(tf_chart):
    args = ("template", "x", tf_chart, "--set", "worker.replicas=5,ps.replicas=2,chief.enabled=true")
    first, second = helm(*args), helm(*args)
    assert first.returncode == 0 and first.stdout == second.stdout


def test_templates_use_no_nondeterministic_functions(tf_chart):
    from pathlib import Path

    for path in Path(tf_chart, "templates").rglob("*"):
        if path.is_file():
            text = path.read_text()
            for fn in ("randAlphaNum", "randAlpha", "randNumeric", "uuidv4", "lookup", " now", "genPrivateKey"):
                assert fn not in text, f"{path.name} uses {fn}"


def test_ten_thousand_workers_stay_one_job_and_far_below_the_release_limit():
    m = render({"worker": {"replicas": 10_000}, "ps": {"replicas": 4}})
    assert len(by_kind(m, "Job")) == 1 and len(by_kind(m, "Service")) == 5
    env = {e["name"] for e in pod_specs(m)["mnist-worker"]["containers"][0]["env"]}
    assert "TF_CONFIG" not in env and "TFHELM_CLUSTER_SPEC_FILE" in env  # over 128 KiB: from the file
    cluster = json.loads(by_kind(m, "ConfigMap")[0]["data"]["cluster.json"])
    assert len(cluster["worker"]) == 10_000 and cluster["worker"][9999].startswith(f"{job_names(m)['worker']}-9999.")
    # Helm stores the release gzipped (then base64) in one Secret of at most 1 MiB.
    stored = len(gzip.compress(json.dumps(m).encode())) * 4 / 3
    assert stored < 256 * 1024, stored


def test_tf_config_leaves_the_environment_above_the_inline_limit():
    small = pod_specs(render({"tfConfig": {"inlineMaxBytes": 10_000}}))["mnist-worker"]
    large = render({"tfConfig": {"inlineMaxBytes": 50}})
    assert "TF_CONFIG" in {e["name"] for e in small["containers"][0]["env"]}
    assert "TF_CONFIG" not in {e["name"] for e in pod_specs(large)["mnist-worker"]["containers"][0]["env"]}
    # composed from the mounted spec instead, to the same result (but for the generation:
    # inlineMaxBytes is a value, so the two renders name their Jobs differently)
    inline = render({"tfConfig": {"inlineMaxBytes": 10_000}})
    text = lambda m: json.dumps(sorted(task_tf_configs(m).items()), sort_keys=True)  # noqa: E731
    assert text(large) == text(inline).replace(cluster_config(inline)[1], cluster_config(large)[1])


@pytest.mark.parametrize("values,message", [
    ({"workers": 3}, "values: additional properties 'workers' not allowed"),
    ({"worker": {"replicas": 0}}, "worker.replicas: minimum: got 0, want 1"),
    ({"worker": {"replicas": -2}}, "worker.replicas: minimum"),
    ({"ps": {"replicas": 101}}, "ps.replicas: maximum: got 101, want 100"),
    ({"worker": {"gpu": 1}}, "worker: additional properties 'gpu' not allowed"),
    ({"mode": "async"}, "mode:"),
    ({"code": {"url": "ftp://x/t.py"}}, "code.url:"),
    ({"code": {"sha256": "xyz"}}, "code.sha256:"),
    ({"clusterName": "Mnist"}, "clusterName:"),
    ({"storage": {"data": {"size": "lots"}}}, "storage.data.size:"),
])
def test_schema_rejects_bad_values(values, message):
    with pytest.raises(RenderError, match=message.replace("(", r"\(").replace(")", r"\)")):
        render(values)


@pytest.mark.parametrize("values,message", [
    ({"code": {"source": "url"}}, "code.url is required"),
    ({"code": {"source": "configMap"}}, "code.configMap is required"),
    ({"code": {"source": "inline"}}, "code.inline is required"),
    ({"mode": "in-graph", "ps": {"replicas": 0}}, "in-graph\" needs parameter servers"),
    ({"components": "ps", "ps": {"replicas": 0}}, "this release would be empty"),
    ({"storage": {"storageClass": {"create": True}}}, "provisioner is required"),
])
def test_invalid_combinations_fail_with_a_message(values, message):
    with pytest.raises(RenderError, match=message):
        render(values)


def test_release_names_too_long_for_hostnames_fail():
    name = "a" * 53
    with pytest.raises(RenderError, match="exceeds 63 characters"):
        render({"worker": {"replicas": 1000}}, release=name)
