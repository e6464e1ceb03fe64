"""Day 2 on the real control plane: a changed cluster (workers, image) applies through plain
`helm upgrade`, `helm rollback`, `kubectl apply --server-side --prune` and a Flux-style
`helm upgrade --install --reset-values`; `tfhelm up` shows a change, refuses to replace a
training unless told, dry-runs server-side first and undoes a refused attempt; interrupted
installs are found; `down/status/reap/tfconfig` touch only tf-cluster releases.

Worker pods carry `tfhelm.io/kwok-complete-after: 1h` where a test needs a training that
keeps running: nothing here depends on how long anything takes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException
from typer.testing import CliRunner

from tfhelm.chart import chart_path, default_values
from tfhelm.cli import app
from tfhelm.cluster import deploy
from tfhelm.cluster.values import ClusterOptions
from tfhelm.helm import Helm, helm_executable
from tfhelm.pod.tfconfig import expand_cluster

from .conftest import wait_for

CHART = str(chart_path())
_IMAGE = default_values()["image"]
IMAGE = f"{_IMAGE['repository']}:{_IMAGE['tag']}"  # the chart's default
NEW_TAG = "lifecycle-test"
NEW_IMAGE = f"{_IMAGE['repository']}:{NEW_TAG}"
RUNNING = "worker.podAnnotations.tfhelm\\.io/kwok-complete-after=1h"  # a training that keeps running
NO_STORAGE = ["--set", "storage.data.enabled=false", "--set", "storage.logs.enabled=false"]
runner = CliRunner()


def tfhelm(*args: str, code: int = 0):
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


def said(result) -> str:
    """A CLI run's stderr with rich's line wrapping undone."""
    return " ".join(result.stderr.split())


def helm(*args: str, stdin: str | None = None) -> str:
    result = subprocess.run([helm_executable(), *args], input=stdin, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def revisions(ns: str, release: str) -> int:
    return len(json.loads(helm("history", release, "-n", ns, "-o", "json")))


def jobs(batch, ns: str, cluster: str, role: str = "worker") -> list:
    """The cluster's Jobs of a role that are not on their way out."""
    return [j for j in batch.list_namespaced_job(
        ns, label_selector=f"tfhelm.io/cluster={cluster},tfhelm.io/role={role}").items
        if not j.metadata.deletion_timestamp]


def only_job(batch, ns: str, cluster: str):
    """Wait until the old generation is gone: exactly one worker Job remains."""
    return wait_for(lambda: (lambda js: js[0] if len(js) == 1 else None)(jobs(batch, ns, cluster)),
                    60, what=f"one worker Job of {ns}/{cluster}")


def ps_workers(apps, ns: str, cluster: str) -> list[str]:
    """The worker hosts in PS task 0's TF_CONFIG, from the cluster spec its Deployment mounts
    as both stand in the API server (expanded by the launcher's own code)."""
    pod = apps.read_namespaced_deployment(f"{cluster}-ps-0", ns).spec.template.spec
    volume = next(v for v in pod.volumes if v.name == "tfhelm-config").config_map.name
    data = client.CoreV1Api(apps.api_client).read_namespaced_config_map(volume, ns).data
    return expand_cluster(json.loads(data["cluster-spec.json"]))["worker"]


def assert_consistent(batch, apps, ns: str, cluster: str, workers: int, image: str) -> str:
    """One worker Job of `workers` tasks on `image`, and the PS knows exactly its hosts."""
    job = only_job(batch, ns, cluster)
    name = job.metadata.name
    assert job.spec.completions == workers
    assert job.spec.template.spec.containers[0].image == image
    assert apps.read_namespaced_deployment(f"{cluster}-ps-0", ns).spec.template.spec.containers[0].image == image
    assert ps_workers(apps, ns, cluster) == [f"{name}-{i}.{cluster}-worker.{ns}.svc.cluster.local:2222" for i in range(workers)]
    return name


# --------------------------------------------------------- plain Helm, GitOps, Flux

def test_helm_upgrade_and_rollback_across_a_worker_count_and_image_change(namespace, batch, apps):
    helm("install", "g", CHART, "-n", namespace, "--set", "worker.replicas=2", *NO_STORAGE)
    first = assert_consistent(batch, apps, namespace, "g", 2, IMAGE)
    first_uid = jobs(batch, namespace, "g")[0].metadata.uid

    helm("upgrade", "g", CHART, "-n", namespace, "--reuse-values",
         "--set", "worker.replicas=3", "--set", f"image.tag={NEW_TAG}")
    second = assert_consistent(batch, apps, namespace, "g", 3, NEW_IMAGE)
    assert second != first
    assert json.loads(helm("status", "g", "-n", namespace, "-o", "json"))["info"]["status"] == "deployed"

    helm("rollback", "g", "1", "-n", namespace)
    back = assert_consistent(batch, apps, namespace, "g", 2, IMAGE)
    assert back == first and jobs(batch, namespace, "g")[0].metadata.uid != first_uid  # re-created
    assert json.loads(helm("status", "g", "-n", namespace, "-o", "json"))["info"]["status"] == "deployed"


# kubectl prunes server-side applied objects only through an ApplySet; the classic
# label-selected prune works with client-side apply.
PRUNE = {"server-side-applyset": ["--server-side", "--prune", "--applyset=gops"],
         "client-side-selector": ["--prune", "-l", "tfhelm.io/cluster=gops"]}


@pytest.mark.parametrize("mode", sorted(PRUNE))
def test_gitops_apply_with_prune_after_a_change(namespace, batch, apps, mode):
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is built with the local control plane (make testenv)"

    def sync(*sets: str) -> None:
        manifests = helm("template", "gops", CHART, "-n", namespace, *NO_STORAGE,
                         *[a for s in sets for a in ("--set", s)])
        result = subprocess.run([kubectl, "apply", "-n", namespace, *PRUNE[mode], "-f", "-"],
                                input=manifests, capture_output=True, text=True,
                                env={**os.environ, "KUBECTL_APPLYSET": "true"})
        assert result.returncode == 0, result.stderr

    sync("worker.replicas=2")
    first = assert_consistent(batch, apps, namespace, "gops", 2, IMAGE)
    sync("worker.replicas=4", f"image.tag={NEW_TAG}")
    second = assert_consistent(batch, apps, namespace, "gops", 4, NEW_IMAGE)
    assert second != first  # the old Job was pruned, not patched (its template is immutable)


def test_flux_style_upgrade_install_with_reset_values(namespace, batch, apps, tmp_path):
    """Flux's helm-controller runs install, then upgrade with the HelmRelease's values and
    reset values (no --reuse-values): the same as `helm upgrade --install --reset-values -f`."""
    values = tmp_path / "values.yaml"

    def reconcile(doc: dict) -> None:
        values.write_text(yaml.safe_dump(doc))
        helm("upgrade", "--install", "flux", CHART, "-n", namespace, "--reset-values", "-f", str(values))

    base = {"storage": {"data": {"enabled": False}, "logs": {"enabled": False}}}
    reconcile({**base, "worker": {"replicas": 2}})
    first = assert_consistent(batch, apps, namespace, "flux", 2, IMAGE)
    reconcile({**base, "worker": {"replicas": 5}, "image": {"tag": NEW_TAG}})
    assert assert_consistent(batch, apps, namespace, "flux", 5, NEW_IMAGE) != first
    assert revisions(namespace, "flux") == 2


# --------------------------------------------------------- tfhelm up on an existing cluster

def test_up_shows_the_change_and_replaces_a_running_training_only_when_told(namespace, batch, core):
    base = ["up", "--name", "run", "-n", namespace, "--ps", "1", *NO_STORAGE, "--set", RUNNING]
    tfhelm(*base, "--workers", "2")
    old = only_job(batch, namespace, "run")
    wait_for(lambda: len(core.list_namespaced_pod(namespace, label_selector=f"job-name={old.metadata.name}").items) == 2,
             60, what="2 worker pods")
    pods = {p.metadata.uid for p in core.list_namespaced_pod(namespace, label_selector=f"job-name={old.metadata.name}").items}

    refused = tfhelm(*base, "--workers", "3", code=2)
    assert "worker.replicas: 2 -> 3" in said(refused)
    assert f"Job {old.metadata.name} (Running, 0/2 succeeded) is replaced" in said(refused)
    assert "--replace" in said(refused) and "nothing was changed" in said(refused)
    assert only_job(batch, namespace, "run").metadata.uid == old.metadata.uid
    assert {p.metadata.uid for p in core.list_namespaced_pod(
        namespace, label_selector=f"job-name={old.metadata.name}").items} == pods
    assert (revisions(namespace, "run"), revisions(namespace, "run-ps")) == (1, 1)

    same = tfhelm(*base, "--workers", "2")  # unchanged: nothing replaced, nothing asked
    assert "is replaced" not in said(same)
    assert only_job(batch, namespace, "run").metadata.uid == old.metadata.uid

    done = tfhelm(*base, "--workers", "3", "--replace")
    assert "server-side dry run" in said(done)
    new = only_job(batch, namespace, "run")
    assert new.metadata.name != old.metadata.name and new.spec.completions == 3


def test_a_refused_upgrade_keeps_the_finished_training(namespace, batch, apps):
    base = ["up", "--name", "fin", "-n", namespace, "--ps", "1", "--workers", "2", *NO_STORAGE]
    tfhelm(*base, "--wait", "--timeout", "120")
    # --wait returns at the last pod's success, which the Job controller counts a moment later.
    old = wait_for(lambda: (j := only_job(batch, namespace, "fin")).status.succeeded == 2 and j, 30,
                   what="the Job controller's count")
    ps_rev = apps.read_namespaced_deployment("fin-ps-0", namespace).metadata.generation
    refused = tfhelm(*base, "--set", "image.tag=other", code=2)  # a finished training is kept too
    assert f"Job {old.metadata.name} (Complete, 2/2 succeeded) is replaced" in said(refused)
    # Admitted by the schema, refused by the API server; --replace given, so only the
    # server-side dry run stands between the request and the finished training.
    result = tfhelm(*base, "--replace", "--set", "worker.resources.requests.memory=8Gi", code=5)
    assert "refuses Job" in said(result) and "invalid" in said(result).lower()
    kept = batch.read_namespaced_job(old.metadata.name, namespace)
    assert kept.metadata.uid == old.metadata.uid and kept.status.succeeded == 2
    assert (revisions(namespace, "fin"), revisions(namespace, "fin-ps")) == (1, 1)
    assert apps.read_namespaced_deployment("fin-ps-0", namespace).metadata.generation == ps_rev

    rerun = tfhelm(*base, "--replace")  # same values, told to replace: a new run
    assert f"deleted Job {namespace}/{old.metadata.name} for a new run" in said(rerun)
    again = only_job(batch, namespace, "fin")
    assert again.metadata.name == old.metadata.name and again.metadata.uid != old.metadata.uid


@pytest.fixture
def refuse_real_jobs(api_client, namespace):
    """A ValidatingAdmissionPolicy that admits Jobs in a dry run and refuses them for real:
    a refusal only the real install meets (as a quota used up in between would be)."""
    adm = client.AdmissionregistrationV1Api(api_client)
    fresh = namespace + "-new"
    name = f"refuse-jobs-{namespace}"[:63]
    adm.create_validating_admission_policy({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                                                          "operations": ["CREATE"], "resources": ["jobs"]}]},
                 "validations": [{"expression": "request.dryRun == true",
                                  "message": "jobs are refused here (test policy)"}]}})
    adm.create_validating_admission_policy_binding({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchExpressions": [{
                     "key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace, fresh]}]}}}})
    batch = client.BatchV1Api(api_client)
    probe = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe"},
             "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                 {"name": "x", "image": "x", "securityContext": {
                     "allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000,
                     "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}]}}}}

    def in_force() -> bool:  # the policy takes a moment to reach the admission chain
        try:
            batch.create_namespaced_job(namespace, probe)
        except ApiException as e:
            return "test policy" in (e.body or "")
        batch.delete_namespaced_job("probe", namespace, propagation_policy="Background")
        wait_for(lambda: not [j for j in batch.list_namespaced_job(namespace).items if j.metadata.name == "probe"],
                 30, what="probe Job deleted")
        return False
    wait_for(in_force, 30, what="the test admission policy")
    yield fresh
    adm.delete_validating_admission_policy_binding(name)
    adm.delete_validating_admission_policy(name)


def test_a_refused_install_removes_what_it_made_and_keeps_existing_data(namespace, core, refuse_real_jobs):
    core.create_namespaced_persistent_volume_claim(namespace, {
        "metadata": {"name": "team-data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    result = tfhelm("up", "--name", "ref", "-n", namespace, "--workers", "1", "--ps", "1",
                    "--set", "storage.data.existingClaim=team-data", code=5)
    assert "test policy" in said(result)
    assert "removing PersistentVolumeClaim" in said(result) and "ref-logs" in said(result)
    assert json.loads(helm("list", "-n", namespace, "--deployed", "--failed", "--pending", "-o", "json")) == []
    # The logs PVC this attempt made is gone; the data that was there stays.
    wait_for(lambda: {p.metadata.name for p in core.list_namespaced_persistent_volume_claim(namespace).items
                      if not p.metadata.deletion_timestamp} == {"team-data"}, 30, what="only team-data left")

    fresh = refuse_real_jobs  # a namespace tfhelm creates is removed again
    tfhelm("up", "--name", "ref", "-n", fresh, "--workers", "1", "--ps", "0", code=5)

    def gone() -> bool:
        try:
            return core.read_namespace(fresh).status.phase == "Terminating"
        except ApiException as e:
            return e.status == 404
    wait_for(gone, 30, what=f"namespace {fresh} removed")


# --------------------------------------------------------- interrupted installs

def ps_release_only(ns: str, name: str) -> None:
    """What a `tfhelm up` killed between its two releases leaves: the PS release alone."""
    p = deploy.plan(ClusterOptions(name=name, namespace=ns, workers=2, ps=1,
                                   value_files=[{"storage": {"data": {"enabled": False}, "logs": {"enabled": False}}}]))
    ps = p.releases[0]
    Helm().install_or_upgrade(ps.name, ps.values, ns)


def releases(ns: str) -> list[str]:
    return sorted(r["name"] for r in json.loads(helm("list", "-n", ns, "--deployed", "--failed", "--pending", "-o", "json")))


def test_an_interrupted_install_is_shown_and_finished_or_removed(namespace, batch):
    ps_release_only(namespace, "half")
    shown = tfhelm("status", "half", "-n", namespace)
    assert "interrupted install" in said(shown) and "half-ps" in said(shown)
    assert "1 parameter server(s)" in shown.stdout

    reaped = subprocess.run([str(Path(sys.executable).parent / "tfhelm"), "reap", "half",
                             "-n", namespace], capture_output=True, text=True, timeout=120)
    assert reaped.returncode == 0, reaped.stderr
    assert "interrupted install" in said(reaped) and releases(namespace) == []

    ps_release_only(namespace, "half")
    tfhelm("down", "half", "-n", namespace)
    assert releases(namespace) == []

    ps_release_only(namespace, "half")  # `tfhelm up` again finishes it
    tfhelm("up", "--name", "half", "-n", namespace, "--workers", "2", "--ps", "1", *NO_STORAGE)
    assert releases(namespace) == ["half", "half-ps"]
    assert len(jobs(batch, namespace, "half")) == 1


# --------------------------------------------------------- only tf-cluster releases

def test_commands_touch_only_tf_cluster_releases(namespace, tmp_path):
    chart = tmp_path / "other"
    (chart / "templates").mkdir(parents=True)
    # A pre-release version: the chart's name is "other", not what precedes the last "-".
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: other\nversion: 1.0.0-rc.1\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata: {a: b}\n")
    helm("install", "ws", str(chart), "-n", namespace)
    for args in (["down", "ws"], ["down", "ws", "--purge"], ["status", "ws"], ["reap", "ws"],
                 ["tfconfig", "ws", "--task", "worker:0"]):
        result = tfhelm(*args, "-n", namespace, code=2)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert f"release {namespace}/ws holds chart other, not a TF cluster" in said(result)
    assert releases(namespace) == ["ws"]


# --------------------------------------------------------- one install at a time, drift, stops

def test_up_holds_a_lease_and_a_second_up_names_its_holder(namespace, api_client, core):
    leases = client.CoordinationV1Api(api_client)
    name, base = "lk", ["up", "--name", "lk", "-n", namespace, "--workers", "1", "--ps", "0", *NO_STORAGE]
    seen: list[tuple[str, str]] = []
    watching = threading.Event()

    def watch():  # every change of the cluster's Lease while `tfhelm up` runs
        w = k8s_watch.Watch()
        watching.set()
        for ev in w.stream(leases.list_namespaced_lease, namespace, field_selector=f"metadata.name=tfhelm-up-{name}",
                           timeout_seconds=120):
            seen.append((ev["type"], ev["object"].spec.holder_identity))
            if ev["type"] == "MODIFIED" and not ev["object"].spec.holder_identity:
                w.stop()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    watching.wait(10)
    first = subprocess.Popen([sys.executable, "-m", "tfhelm", *base], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert first.wait(300) == 0, first.stderr.read()
    watcher.join(120)
    # Taken by that process for its install, and released (no holder) at its end.
    assert seen[0][0] == "ADDED" and seen[0][1].endswith(f" pid {first.pid}") and seen[-1] == ("MODIFIED", None), seen

    now = datetime.now(timezone.utc)
    held = leases.read_namespaced_lease(f"tfhelm-up-{name}", namespace)
    held.spec = client.V1LeaseSpec(holder_identity="alice@laptop pid 4242", lease_duration_seconds=30,
                                   acquire_time=now, renew_time=now)
    leases.replace_namespaced_lease(f"tfhelm-up-{name}", namespace, held)
    refused = tfhelm(*base, "--workers", "2", code=2)
    assert "another `tfhelm up` of" in said(refused) and "alice@laptop pid 4242" in said(refused)
    assert "nothing was changed" in said(refused)
    assert len(jobs(client.BatchV1Api(api_client), namespace, name)) == 1 and revisions(namespace, name) == 1

    # A holder that died stops renewing: once its Lease is older than its duration, `up` takes it.
    stale = leases.read_namespaced_lease(f"tfhelm-up-{name}", namespace)
    stale.spec.renew_time = stale.spec.acquire_time = now - timedelta(minutes=5)
    leases.replace_namespaced_lease(f"tfhelm-up-{name}", namespace, stale)
    tfhelm(*base)
    assert not leases.read_namespaced_lease(f"tfhelm-up-{name}", namespace).spec.holder_identity, "released"
    tfhelm("down", name, "-n", namespace)  # and `down` takes the released Lease away
    with pytest.raises(ApiException) as gone:
        leases.read_namespaced_lease(f"tfhelm-up-{name}", namespace)
    assert gone.value.status == 404


def test_up_repairs_a_hand_edit_and_names_the_field(namespace, core):
    base = ["up", "--name", "dr", "-n", namespace, "--workers", "1", "--ps", "0", *NO_STORAGE]
    tfhelm(*base)
    original = core.read_namespaced_config_map("dr-tfconfig", namespace).data["cluster-spec.json"]
    core.patch_namespaced_config_map("dr-tfconfig", namespace, {"data": {"cluster-spec.json": "{}"}},
                                     field_manager="kubectl-edit")
    repaired = tfhelm(*base)
    assert (f"drift: ConfigMap {namespace}/dr-tfconfig: .data.cluster-spec.json changed by kubectl-edit; "
            "set back to the chart's value") in said(repaired)
    assert core.read_namespaced_config_map("dr-tfconfig", namespace).data["cluster-spec.json"] == original
    history = json.loads(helm("history", "dr", "-n", namespace, "-o", "json"))
    assert [r["status"] for r in history] == ["superseded", "deployed"]  # no failed revision


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_up_wait_reap_says_what_is_left_and_how_to_reap_it(namespace, sig):
    proc = subprocess.Popen([sys.executable, "-m", "tfhelm", "up", "--name", "st", "-n", namespace, "--workers",
                             "1", "--ps", "1", *NO_STORAGE, "--set", RUNNING, "--wait", "--reap"],
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # As from a terminal: a shell's background job (CI) ignores SIGINT.
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    wait_for(lambda: any("tasks of" in ln for ln in lines), 120, what="`up --wait` to be waiting")
    proc.send_signal(sig)
    assert proc.wait(60) == 130
    reader.join(10)
    text = " ".join("".join(lines).split())
    assert f"interrupted: {namespace}/st is left as it is: training running, 1 parameter server(s)" in text, text
    assert f"Reap it when done: tfhelm reap st -n {namespace}" in text and "Traceback" not in text


def test_a_planted_lease_is_bounded_escaped_and_taken_over_with_force(namespace, api_client):
    """A Lease written by hand (issue #31): a duration of a year and a holder with terminal
    escapes. `up` says truthfully when it frees itself (no more than tfhelm's own duration),
    shows the holder escaped, and `--force` takes it over at once, saying whose it was."""
    leases = client.CoordinationV1Api(api_client)
    name, base = "pl", ["up", "--name", "pl", "-n", namespace, "--workers", "1", "--ps", "0", *NO_STORAGE]
    now = datetime.now(timezone.utc)
    holder = "\x1b]0;pwned\x07mallory"
    leases.create_namespaced_lease(namespace, client.V1Lease(
        metadata=client.V1ObjectMeta(name=f"tfhelm-up-{name}"),
        spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=365 * 86400,
                                acquire_time=now, renew_time=now)))
    refused = tfhelm(*base, code=2)
    assert "\x1b" not in refused.stderr and "held by \\x1b]0;pwned\\x07mallory" in said(refused)
    assert re.search(r"frees itself within ([1-9]|[12][0-9]|30)s, or `--force` takes it over now", said(refused)), said(refused)
    taken = tfhelm(*base, "--force")
    assert "took the install lock (Lease" in said(taken) and "over from \\x1b]0;pwned\\x07mallory (--force)" in said(taken)
    # A renewal a year ahead of this clock holds nothing: taken at once, without --force.
    held = leases.read_namespaced_lease(f"tfhelm-up-{name}", namespace)
    held.spec = client.V1LeaseSpec(holder_identity="skewed", lease_duration_seconds=30,
                                   acquire_time=now, renew_time=now + timedelta(days=365))
    leases.replace_namespaced_lease(f"tfhelm-up-{name}", namespace, held)
    tfhelm(*base)


def test_up_wait_ends_at_once_when_its_cluster_is_removed(namespace):
    proc = subprocess.Popen([sys.executable, "-m", "tfhelm", "up", "--name", "rm", "-n", namespace, "--workers",
                             "1", "--ps", "1", *NO_STORAGE, "--set", RUNNING, "--wait", "--timeout", "3600"],
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    wait_for(lambda: any("tasks of" in ln for ln in lines), 120, what="`up --wait` to be waiting")
    tfhelm("down", "rm", "-n", namespace)
    assert proc.wait(60) == 1  # not the hour of its --timeout (exit 4)
    reader.join(10)
    text = " ".join("".join(lines).split())
    assert f"{namespace}/rm was removed while waiting (its Jobs are gone: `tfhelm down`?)" in text, text


def test_list_and_status_name_a_deleted_job_instead_of_serving(namespace, batch):
    tfhelm("up", "--name", "dj", "-n", namespace, "--workers", "1", "--ps", "1", *NO_STORAGE, "--set", RUNNING)
    (job,) = jobs(batch, namespace, "dj")
    batch.delete_namespaced_job(job.metadata.name, namespace, propagation_policy="Background")
    wait_for(lambda: not jobs(batch, namespace, "dj"), 60, what="the worker Job gone")
    listed = tfhelm("list", "-n", namespace, "-o", "json")
    assert [r["training"] for r in json.loads(listed.stdout) if r["name"] == "dj"] == ["Deleted (worker Job)"]
    status = tfhelm("status", "dj", "-n", namespace, code=1)
    assert "the worker Job(s) of this cluster are gone" in " ".join(status.stdout.split())
    assert json.loads(tfhelm("status", "dj", "-n", namespace, "-o", "json", code=1).stdout)["training"] == "Deleted"
