"""The tf-cluster chart, rendered by the real `helm template`."""

import copy
import json
from pathlib import Path

import pytest
import yaml

from tfhelm.cluster.manifests import by_kind, cluster_config, job_names
from tfhelm.errors import RenderError
from tests.helpers.pods import task_tf_configs
from tests.helpers.release_size import chart_files, stored_release

from .conftest import helm, kinds, pod_specs, render


def test_helm_lint_is_clean(tf_chart):
    result = helm("lint", "--strict", tf_chart)
    assert result.returncode == 0, result.stdout + result.stderr


def test_default_install_is_one_ps_one_worker_volumes_and_the_reaper():
    assert kinds(render()) == [
        ("ConfigMap", "mnist-tfconfig"), ("Deployment", "mnist-ps-0"), ("Deployment", "mnist-reaper"),
        ("Job", "mnist-worker"), ("NetworkPolicy", "mnist-fence"),
        ("PersistentVolumeClaim", "mnist-data"), ("PersistentVolumeClaim", "mnist-logs"),
        ("Pod", "mnist-test"),  # the `helm test` hook: installed only by `helm test`
        ("Role", "mnist-reaper"), ("RoleBinding", "mnist-reaper"),
        ("Service", "mnist-ps-0"), ("Service", "mnist-worker"), ("ServiceAccount", "mnist-reaper")]


def test_workers_are_one_indexed_job_and_one_headless_service():
    m = render({"worker": {"replicas": 8, "backoffLimit": 6, "activeDeadlineSeconds": 3600,
                           "ttlSecondsAfterFinished": 600}})
    (job,) = by_kind(m, "Job")
    assert job["spec"] | {"template": None} == {
        "completionMode": "Indexed", "completions": 8, "parallelism": 8,
        "podReplacementPolicy": "Failed", "backoffLimitPerIndex": 3, "maxFailedIndexes": 0,
        "backoffLimit": 6, "activeDeadlineSeconds": 3600, "ttlSecondsAfterFinished": 600,
        "podFailurePolicy": job["spec"]["podFailurePolicy"], "template": None}
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
    deployments = [d for d in by_kind(m, "Deployment") if d["metadata"]["labels"]["tfhelm.io/role"] == "ps"]
    assert [d["metadata"]["name"] for d in deployments] == ["mnist-ps-0", "mnist-ps-1", "mnist-ps-2"]
    for i, d in enumerate(deployments):
        assert d["spec"]["replicas"] == 1 and d["spec"]["strategy"] == {"type": "Recreate"}
        assert d["spec"]["selector"]["matchLabels"]["tfhelm.io/task-index"] == str(i)
        svc = next(s for s in by_kind(m, "Service") if s["metadata"]["name"] == f"mnist-ps-{i}")
        assert svc["spec"]["selector"] == d["spec"]["selector"]["matchLabels"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert all(labels[k] == v for k, v in svc["spec"]["selector"].items())


def test_pods_carry_the_spec_file_and_their_index_not_tf_config():
    """TF_CONFIG lists every task: inline, it would make every pod grow with the cluster."""
    env = pod_specs(render())["mnist-worker"]["containers"][0]["env"]
    assert "TF_CONFIG" not in [e["name"] for e in env]
    assert env[0] == {"name": "TFHELM_TASK_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
    assert {"name": "TFHELM_CLUSTER_SPEC_FILE", "value": "/etc/tfhelm/cluster-spec.json"} in env


def test_every_task_gets_its_own_tf_config():
    m = render({"worker": {"replicas": 3}, "ps": {"replicas": 2}, "chief": {"enabled": True},
                "evaluator": {"enabled": True}})
    configs = task_tf_configs(m)
    assert sorted(configs) == [("chief", 0), ("evaluator", 0), ("ps", 0), ("ps", 1),
                               ("worker", 0), ("worker", 1), ("worker", 2)]
    for (role, index), cfg in configs.items():
        assert cfg["task"] == {"type": role, "index": index}
        assert cfg["cluster"]["worker"][2] == f"{job_names(m)['worker']}-2.mnist-worker.team-a.svc.cluster.local:2222"
    cluster = cluster_config(m)[0]
    assert all(cfg["cluster"] == cluster for cfg in configs.values())
    assert json.loads(by_kind(m, "ConfigMap")[0]["data"]["cluster-spec.json"]) == {
        "chief": {"count": 1, "host": f"{job_names(m)['chief']}-{{index}}.mnist-chief.team-a.svc.cluster.local:2222"},
        "ps": {"count": 2, "host": "mnist-ps-{index}.team-a.svc.cluster.local:2222"},
        "worker": {"count": 3, "host": f"{job_names(m)['worker']}-{{index}}.mnist-worker.team-a.svc.cluster.local:2222"}}


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


def test_a_custom_command_runs_under_the_launchers_exec_mode():
    """Their own entrypoint still gets TF_CONFIG: the launcher sets it, then execs it."""
    m = render({"worker": {"command": ["bash", "-c"], "args": ["python /app/x.py"]}})
    c = pod_specs(m)["mnist-worker"]["containers"][0]
    assert c["command"] == ["python3", "/etc/tfhelm/launcher.py", "exec", "--", "bash", "-c"]
    assert c["args"] == ["python /app/x.py"]
    assert task_tf_configs(m)[("worker", 0)]["task"] == {"type": "worker", "index": 0}


def test_code_from_url_is_fetched_by_an_init_container_with_checksum():
    sha = "ab" * 32
    pod = pod_specs(render({"code": {"source": "url", "url": "http://files.team-a/train.py",
                                     "script": "train.py", "sha256": sha, "args": ["--epochs", "3"]}}))
    init = pod["mnist-worker"]["initContainers"][0]
    assert init["command"][2:] == ["http://files.team-a/train.py", "/opt/tfhelm/code/train.py", sha]
    # A failed fetch's last log line (URL, HTTP status) is what `tfhelm status` shows.
    assert init["terminationMessagePolicy"] == "FallbackToLogsOnError"
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
    per_release = ("ConfigMap", "NetworkPolicy")  # each release's own config and fence
    assert {k for k in kinds(ps) if k[0] not in per_release} == {
        ("Deployment", "mnist-ps-0"), ("Deployment", "mnist-ps-1"), ("Service", "mnist-ps-0"), ("Service", "mnist-ps-1")}
    assert not {k for k in kinds(ps) if k[0] not in per_release} & set(kinds(rest))
    assert set(kinds(whole)) == {k for k in kinds(ps) + kinds(rest) if k[1] not in ("mnist-ps-tfconfig", "mnist-ps-fence")}
    assert task_tf_configs(ps) | task_tf_configs(rest) == task_tf_configs(whole)


def test_every_release_fences_its_pods_to_the_namespace_by_default():
    """A TF server does what anyone who reaches it asks: each release's NetworkPolicy admits
    this namespace's pods, `metricsFrom` on the metrics port and `clientFrom` (an in-graph
    chief elsewhere) on the TensorFlow port; its pods only, whichever release they are in."""
    values = {"clusterName": "mnist", "ps": {"replicas": 1}}
    for release, components in (("mnist-ps", "ps"), ("mnist", "workload")):
        (policy,) = by_kind(render(values | {"components": components}, release=release), "NetworkPolicy")
        assert policy["metadata"]["name"] == f"{release}-fence"
        assert policy["spec"] == {
            "podSelector": {"matchLabels": {"app.kubernetes.io/instance": release, "tfhelm.io/cluster": "mnist"}},
            "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]}
    monitoring = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    notebook = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tfhelm-user-alice"}}}]
    (policy,) = by_kind(render({"networkPolicy": {"metricsFrom": monitoring, "clientFrom": notebook}}), "NetworkPolicy")
    assert policy["spec"]["ingress"] == [
        {"from": [{"podSelector": {}}]},
        {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": monitoring},
        {"ports": [{"port": "tf", "protocol": "TCP"}], "from": notebook}]
    assert not by_kind(render({"networkPolicy": {"enabled": False}}), "NetworkPolicy")
    # Turning the fence on or off restarts no task: it is outside the cluster's generation.
    jobs = [by_kind(render({"networkPolicy": {"enabled": on}}), "Job")[0]["metadata"]["name"] for on in (True, False)]
    assert jobs[0] == jobs[1]


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


@pytest.mark.parametrize("workers", [10_000, 100_000])
def test_huge_clusters_stay_one_job_and_render_and_validate(workers):
    m = render({"worker": {"replicas": workers}, "ps": {"replicas": 4}})
    assert len(by_kind(m, "Job")) == 1 and len(by_kind(m, "Service")) == 5
    assert by_kind(m, "Job")[0]["spec"]["completions"] == workers
    cluster = cluster_config(m)[0]
    last = workers - 1
    assert len(cluster["worker"]) == workers and cluster["worker"][last].startswith(f"{job_names(m)['worker']}-{last}.")
    configs = task_tf_configs([o for o in m if o["kind"] != "Job"])  # the PS, at any N
    assert configs[("ps", 3)]["cluster"] == cluster


def _masked(obj: dict, generation: str, workers: int) -> str:
    """An object's YAML with the generation and the worker count masked."""
    obj = copy.deepcopy(obj)
    if obj["kind"] == "ConfigMap" and "cluster-spec.json" in obj["data"]:
        obj["data"]["cluster-spec.json"] = obj["data"]["cluster-spec.json"].replace(
            f'"worker":{{"count":{workers},', '"worker":{"count":N,')
    if obj["kind"] == "Job" and obj["spec"]["completions"] == workers:
        obj["spec"]["completions"] = obj["spec"]["parallelism"] = "N"
    if obj["kind"] == "PodDisruptionBudget" and obj["spec"]["minAvailable"] == workers - 1:
        obj["spec"]["minAvailable"] = "N-1"
    # A generation that reads as a number (`849e61`) is quoted where it stands alone.
    return yaml.safe_dump(obj, sort_keys=True).replace(generation, "GENERATION").replace("'GENERATION'", "GENERATION")


def test_configmap_and_pod_templates_do_not_grow_with_the_worker_count():
    """N=8 and N=100,000 render the same objects, but for the count digits (and the
    generation, a hash of the values, in names and the spec checksum)."""
    values = {"ps": {"replicas": 2}, "chief": {"enabled": True}, "evaluator": {"enabled": True}}
    small = render({**values, "worker": {"replicas": 8}})
    big = render({**values, "worker": {"replicas": 100_000}})
    assert [o["kind"] for o in small] == [o["kind"] for o in big]
    for s, b in zip(small, big):
        if s["kind"] in ("Job", "Deployment"):
            for o in (s, b):  # the checksum of the spec changes with it
                o["spec"]["template"]["metadata"]["annotations"].pop("checksum/cluster-spec", None)
        assert _masked(s, cluster_config(small)[1], 8) == _masked(b, cluster_config(big)[1], 100_000), s["kind"]
    cm = lambda m: by_kind(m, "ConfigMap")[0]["data"]["cluster-spec.json"]  # noqa: E731
    assert len(cm(big)) == len(cm(small)) + len("100000") - len("8")


def test_the_spec_checksum_changes_with_the_hosts():
    checksum = lambda m: by_kind(m, "Job")[0]["spec"]["template"]["metadata"]["annotations"][  # noqa: E731
        "checksum/cluster-spec"]
    base = render({"worker": {"replicas": 2}})
    assert checksum(base) == checksum(render({"worker": {"replicas": 2}}))
    assert checksum(base) != checksum(render({"worker": {"replicas": 3}}))
    assert checksum(base) != checksum(render({"worker": {"replicas": 2}}, namespace="team-b"))


def test_stored_release_is_small_at_100000_workers(tf_chart):
    """Helm stores each release (manifest and top chart, not its subcharts) in one Secret of
    at most 1 MiB; the spec does not grow with N, so 100,000 workers stay under 76 KiB stored
    (72.1 KB: the templates' bodies and the programs live in the library subchart, so the
    launcher and the in-cluster reaper's program with its rules (the queue's gates, lost
    nodes' tasks), which needs no image of its own, are stored once, in the config ConfigMap;
    the schema is compact JSON) and no object nears the 1 MiB limit."""
    values = {"worker": {"replicas": 100_000}, "ps": {"replicas": 4}}
    result = helm("template", "mnist", tf_chart, "-n", "team-a", "-f", "-", stdin=json.dumps(values))
    assert result.returncode == 0, result.stderr
    docs = [d for d in result.stdout.split("\n---\n") if d.strip()]
    assert max(map(len, docs)) < 256 * 1024
    # The model leaves out what Helm adds around it (notes, hook records, timestamps): a real
    # install stored ~2.4 KB more (61,056 vs 58,664 bytes; tests/cluster measures it).
    assert stored_release(Path(tf_chart), result.stdout, values, "mnist", "team-a") < 76 * 1024


def test_a_shipped_script_keeps_the_release_under_84_kib(tf_chart):
    """`tfhelm up --script train.py` ships the script inline: it is stored twice (the values
    and the code ConfigMap), and the release of the example program stays under 84 KiB (the
    model: 79.5 KB; tests/cluster checks the real Secret is under 120 KiB as the API server
    gets it)."""
    script = (Path(__file__).resolve().parents[2] / "examples" / "ps_between_graph.py").read_text()
    values = {"worker": {"replicas": 4}, "ps": {"replicas": 1},
              "code": {"source": "inline", "script": "ps_between_graph.py", "inline": script}}
    result = helm("template", "mnist", tf_chart, "-n", "team-a", "-f", "-", stdin=json.dumps(values))
    assert result.returncode == 0, result.stderr
    assert any(script in cm["data"].values() for cm in by_kind(list(yaml.safe_load_all(result.stdout)), "ConfigMap"))
    assert stored_release(Path(tf_chart), result.stdout, values, "mnist", "team-a") < 84 * 1024


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


def test_inline_code_too_large_for_its_configmap_fails_before_install():
    """Checked by the chart too (plain Helm, GitOps), not only by `tfhelm up --script`."""
    big = {"code": {"source": "inline", "script": "t.py", "inline": "#" * 500_000,
                    "extraFiles": {"m.py": "#" * 300_000}}}
    with pytest.raises(RenderError, match="code.inline and code.extraFiles hold 800000 bytes, over the 786432"):
        render(big)
    render({"code": {**big["code"], "extraFiles": {}}})


def test_the_release_size_model_keeps_the_files_helm_packages(tf_chart, tmp_path):
    """stored_release counts the chart files Helm keeps: the same set `helm package` does."""
    import tarfile

    result = helm("package", tf_chart, "-d", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (archive,) = tmp_path.glob("*.tgz")
    with tarfile.open(archive) as tar:
        packaged = {n.split("/", 1)[1] for n in tar.getnames()}
    library = {n for n in packaged if n.startswith("charts/tf-cluster-lib/")}
    assert packaged - library == set(chart_files(Path(tf_chart)))
    # The package is whole: the library subchart (launcher, named templates) ships in it.
    assert {"charts/tf-cluster-lib/Chart.yaml", "charts/tf-cluster-lib/files/task/launcher.py"} <= library
    assert "VALUES.md" not in packaged and "README.md" in packaged


def test_tfhelm_down_knows_every_kind_the_chart_makes():
    """`tfhelm down` deletes a release's objects by label, kind by kind (never from its
    record): every kind any values render is one it deletes."""
    from tfhelm.cluster.deploy import RELEASE_KINDS

    everything = {"chief": {"enabled": True}, "evaluator": {"enabled": True}, "reaper": {"enabled": True},
                  "serviceAccount": {"create": True}, "code": {"source": "inline", "inline": "pass"},
                  "storage": {"storageClass": {"create": True, "provisioner": "nfs.csi.k8s.io"}},
                  "monitoring": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
                                 "dashboard": {"enabled": True}}}
    made = render(everything)
    assert {o["kind"] for o in made} <= set(RELEASE_KINDS)
    assert all({"app.kubernetes.io/instance", "tfhelm.io/cluster"} <= set(o["metadata"]["labels"]) for o in made)
