"""tf-cluster on a real control plane: admission (Pod Security "restricted"), the Job
controller, the scheduler and kwok's pod lifecycle, installed by tfhelm and by plain helm."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
from pathlib import Path

from kubernetes import client
from typer.testing import CliRunner

from tfhelm.cli import app
from tfhelm.helm import helm_executable
from tests.helpers.pods import COMPLETION_INDEX_FIELD, compose_tf_config, expand_env, mount_config
from tfhelm.chart import chart_path

from .conftest import job_of, wait_for

runner = CliRunner()


def tfhelm(*args: str, code: int = 0):
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


def helm(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([helm_executable(), *args], input=stdin, capture_output=True, text=True)


def releases(ns: str) -> list[str]:
    result = helm("list", "-n", ns, "--deployed", "--failed", "--pending", "-o", "json")
    assert result.returncode == 0, result.stderr
    return sorted(r["name"] for r in json.loads(result.stdout or "[]"))


def cluster_pods(core, ns: str, cluster: str) -> list:
    """The TF tasks' pods (not the in-cluster reaper's, which every cluster has)."""
    return core.list_namespaced_pod(
        ns, label_selector=f"tfhelm.io/cluster={cluster},tfhelm.io/role in (chief,worker,ps,evaluator)").items


def job_state(batch, ns: str, name: str) -> str | None:
    status = batch.read_namespaced_job(name, ns).status
    return next((c.type for c in status.conditions or []
                 if c.type in ("Complete", "Failed") and c.status == "True"), None)


def pod_tf_config(pod, core, tmp_path) -> tuple[tuple[str, int], dict]:
    """TF_CONFIG as the launcher composes it in the pod stored in the API server: from the
    environment the kubelet builds and the ConfigMap the pod mounts, as stored there too."""
    container = next(c for c in pod.spec.containers if c.name == "tensorflow")
    env = [e.to_dict() for e in container.env]
    env = [{k: v for k, v in e.items() if v is not None} for e in env]
    for e in env:
        if "value_from" in e:
            e["valueFrom"] = {"fieldRef": {"fieldPath": e.pop("value_from")["field_ref"]["field_path"]}}
    index = (pod.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index")
    values = expand_env(env, {COMPLETION_INDEX_FIELD: index} if index is not None else {})
    volume = next(v for v in pod.spec.volumes if v.name == "tfhelm-config").config_map.name
    cm = core.read_namespaced_config_map(volume, pod.metadata.namespace)
    config = compose_tf_config(values, mount_config(cm.data, tmp_path / pod.metadata.name))
    return (values["TFHELM_TASK_TYPE"], int(values["TFHELM_TASK_INDEX"])), config


def test_up_status_down_on_a_restricted_namespace(namespace, core, batch):
    tfhelm("up", "--name", "mnist", "-n", namespace, "--workers", "4", "--ps", "2", "--chief", "--wait",
           "--timeout", "180")
    assert releases(namespace) == ["mnist", "mnist-ps"]
    # The real Job controller made 4 indexed worker pods; kwok ran and completed them.
    # --wait returned at the chief pod's success; the Job controller says so a moment later.
    worker_job = job_of(namespace, "mnist", "worker")
    for job in (worker_job, job_of(namespace, "mnist", "chief")):
        wait_for(lambda: job_state(batch, namespace, job) == "Complete", 60, what=f"Job {job} Complete")
    pods = cluster_pods(core, namespace, "mnist")
    workers = sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"]
                     for p in pods if p.metadata.labels["tfhelm.io/role"] == "worker")
    assert workers == ["0", "1", "2", "3"]
    assert all(p.spec.node_name for p in pods)  # bound by the real scheduler
    assert all(p.spec.hostname == f"{worker_job}-{p.metadata.annotations['batch.kubernetes.io/job-completion-index']}"
               and p.spec.subdomain == "mnist-worker" for p in pods if p.metadata.labels["tfhelm.io/role"] == "worker")

    out = tfhelm("status", "mnist", "-n", namespace).stdout
    assert f"job {worker_job}: 4/4 succeeded, 0 failed — Complete" in out
    assert "2 parameter server(s)" in out and "worker:3" in out

    pvcs = {p.metadata.name: p.status.phase for p in core.list_namespaced_persistent_volume_claim(namespace).items}
    assert pvcs == {"mnist-data": "Bound", "mnist-logs": "Bound"}
    tfhelm("down", "mnist", "-n", namespace)
    assert releases(namespace) == []
    wait_for(lambda: not batch.list_namespaced_job(namespace).items, 60, what="Jobs gone")
    assert {p.metadata.name for p in core.list_namespaced_persistent_volume_claim(namespace).items} == {
        "mnist-data", "mnist-logs"}  # data, logs and checkpoints survive
    tfhelm("down", "mnist", "-n", namespace, "--purge")
    wait_for(lambda: not core.list_namespaced_persistent_volume_claim(namespace).items, 60, what="PVCs purged")


def test_every_pod_tf_config_in_the_api_server_matches_tfhelm_tfconfig(namespace, core, tmp_path):
    tfhelm("up", "--name", "agree", "-n", namespace, "--workers", "3", "--ps", "2", "--chief", "--evaluator")
    pods = wait_for(lambda: (lambda ps: ps if len(ps) == 7 else None)(cluster_pods(core, namespace, "agree")),
                    60, what="7 pods")
    seen = set()
    for pod in pods:
        task, config = pod_tf_config(pod, core, tmp_path)
        seen.add(task)
        expected = tfhelm("tfconfig", "agree", "-n", namespace, "--task", f"{task[0]}:{task[1]}").stdout
        assert config == json.loads(expected), task
    assert seen == {("chief", 0), ("evaluator", 0), ("ps", 0), ("ps", 1),
                    ("worker", 0), ("worker", 1), ("worker", 2)}


def test_plain_helm_install_makes_the_same_cluster(namespace, core, batch, tmp_path):
    values = {"worker": {"replicas": 3}, "ps": {"replicas": 1}}
    result = helm("install", "plain", str(chart_path()), "-n", namespace, "-f", "-", "--wait",
                  "--wait-for-jobs", "--timeout", "3m", stdin=json.dumps(values))
    assert result.returncode == 0, result.stderr
    assert job_state(batch, namespace, job_of(namespace, "plain", "worker")) == "Complete"
    configs = dict(pod_tf_config(p, core, tmp_path) for p in cluster_pods(core, namespace, "plain"))
    assert sorted(configs) == [("ps", 0), ("worker", 0), ("worker", 1), ("worker", 2)]
    via_cli = json.loads(tfhelm("tfconfig", "plain", "-n", namespace, "--task", "worker:2").stdout)
    assert configs[("worker", 2)] == via_cli


def test_a_rejected_object_leaves_no_release_behind(namespace):
    # Values the schema lets through but the API server refuses: a request above its limit.
    result = tfhelm("up", "--name", "bad", "-n", namespace, "--workers", "2", "--ps", "1",
                    "--set", "worker.resources.requests.memory=8Gi", code=5)
    assert "Job " in result.stderr and "bad-worker-" in result.stderr and "invalid" in result.stderr.lower()
    assert len(result.stderr.strip().splitlines()[-1:]) == 1 and "Traceback" not in result.output
    assert releases(namespace) == []  # refused by the server-side dry run: no release was made


def test_a_release_of_100000_workers_is_stored_small(namespace, core):
    """The stored release (Helm's Secret: gzip + base64 of the release and its top chart;
    Helm keeps no subchart, so the launcher and the in-cluster reaper's program in
    charts/tf-cluster-lib are stored once, in the config ConfigMap) is under 80 KiB at 100,000
    workers, and as large as at 8. With the example program shipped inline (stored twice:
    values and code ConfigMap) the whole Secret, as the API server gets it (JSON: its data
    base64 once more), stays under 120 KiB.
    A quota of zero pods keeps the Job controller from making 100,000 pods here: the release
    is what is measured."""
    core.create_namespaced_resource_quota(namespace, client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="no-pods"), spec=client.V1ResourceQuotaSpec(hard={"pods": "0"})))
    script = (Path(__file__).resolve().parents[2] / "examples" / "ps_between_graph.py").read_text()
    shipped = {"source": "inline", "script": "ps_between_graph.py", "inline": script}
    sizes = {}
    for key, values in ((8, {"worker": {"replicas": 8}}), (100_000, {"worker": {"replicas": 100_000}}),
                        ("script", {"worker": {"replicas": 4}, "code": shipped})):
        release = f"w{key}"
        result = helm("install", release, str(chart_path()), "-n", namespace, "-f", "-",
                      stdin=json.dumps(values))
        assert result.returncode == 0, result.stderr
        secret = core.read_namespaced_secret(f"sh.helm.release.v1.{release}.v1", namespace)
        sizes[key] = len(base64.b64decode(secret.data["release"]))
        if key == "script":
            sizes["script JSON"] = len(json.dumps(core.api_client.sanitize_for_serialization(secret),
                                                  separators=(",", ":")))
        assert helm("uninstall", release, "-n", namespace).returncode == 0
    assert sizes[100_000] < 80 * 1024, sizes
    assert sizes["script JSON"] < 120 * 1024, sizes
    assert abs(sizes[100_000] - sizes[8]) < 64, sizes  # the count's digits and compression noise


def test_a_local_script_ships_beside_the_release_in_a_configmap_it_owns(namespace, core, tmp_path):
    """`tfhelm up --script ./train.py` ships the script and the .py files beside it in a
    ConfigMap named by their content, not in the releases (Helm would store the code twice in
    every revision). The workload release's config ConfigMap owns it: a plain `helm
    uninstall` removes it too. New code is a new ConfigMap (and new Jobs); the old one goes."""
    src = tmp_path / "code"
    src.mkdir()
    (src / "train.py").write_text("import helper\nhelper.main()\n")
    (src / "helper.py").write_text("def main():\n    pass\n" + "# padding\n" * 4000)
    selector = "tfhelm.io/cluster=shipped,tfhelm.io/role=code"

    def shipped() -> list:
        return core.list_namespaced_config_map(namespace, label_selector=selector).items

    def stored(release: str) -> bytes:
        secret = core.read_namespaced_secret(f"sh.helm.release.v1.{release}.v1", namespace)
        return gzip.decompress(base64.b64decode(base64.b64decode(secret.data["release"])))

    up = ("up", "--name", "shipped", "-n", namespace, "--workers", "2", "--ps", "1", "--script", str(src / "train.py"))
    tfhelm(*up)
    (cm,) = shipped()
    assert cm.data == {"train.py": (src / "train.py").read_text(), "helper.py": (src / "helper.py").read_text()}
    assert cm.immutable and cm.metadata.name.startswith("shipped-code-")
    assert [(o.kind, o.name) for o in cm.metadata.owner_references] == [("ConfigMap", "shipped-tfconfig")]
    assert all(b"# padding" not in stored(r) for r in ("shipped", "shipped-ps"))
    volumes = client.BatchV1Api(core.api_client).read_namespaced_job(
        job_of(namespace, "shipped", "worker"), namespace).spec.template.spec.volumes
    assert [v.config_map.name for v in volumes if v.name == "code"] == [cm.metadata.name]

    (src / "helper.py").write_text("def main():\n    print('v2')\n")
    tfhelm(*up, "--replace")
    (new,) = shipped()
    assert new.metadata.name != cm.metadata.name and "v2" in new.data["helper.py"]

    for release in ("shipped-ps", "shipped"):
        assert helm("uninstall", release, "-n", namespace).returncode == 0
    wait_for(lambda: not shipped(), what="the garbage collector to delete the code with its owner")
    tfhelm(*up)
    assert shipped()
    tfhelm("down", "shipped", "-n", namespace)
    assert not shipped()  # `down` deletes it itself, not in the background


def test_a_configmap_planted_under_the_codes_name_is_replaced_not_run(namespace, core, tmp_path):
    """The shipped code's ConfigMap is named by its content; one of that name made by someone
    else (other code, or the same but mutable, to be changed later) is replaced, and `up` says
    so truthfully, instead of running it (issue #31)."""
    from tfhelm.cluster import code_configmap
    from tfhelm.cluster.values import script_values

    (tmp_path / "train.py").write_text("print('own code')\n")
    values = {"code": script_values(str(tmp_path / "train.py"))}
    _, code = code_configmap.split("planted", values)
    name = code["metadata"]["name"]
    up = ("up", "--name", "planted", "-n", namespace, "--workers", "1", "--ps", "0", "--script", str(tmp_path / "train.py"))
    for planted, why in ((client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name),
                                             data={"train.py": "import os; os.system('steal tokens')\n"}), "other content"),
                         (client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=code["data"]), "mutable")):
        core.create_namespaced_config_map(namespace, planted)
        said = " ".join(tfhelm(*up, "--replace").stderr.split())
        assert f"ConfigMap {namespace}/{name} did not hold the code its name says ({why}); replaced with yours" in said
        assert f"drift: ConfigMap {namespace}/{name}" not in said  # nothing set back but what was
        found = core.read_namespaced_config_map(name, namespace)
        assert found.data == code["data"] and found.immutable
        tfhelm("down", "planted", "-n", namespace)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name), data=code["data"], immutable=True))
    assert "did not hold" not in tfhelm(*up).stderr  # the very code, immutable: used as it is
