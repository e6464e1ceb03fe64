"""The reaper against the real control plane: the Job controller decides success and failure,
kwok completes (or fails) the pods, Helm uninstalls the PS release, RBAC is the real one.

Worker pods carry `tfhelm.io/kwok-complete-after: 1h` where a test decides when they finish:
annotating the Job's pods with a short delay then completes them (`finish()`), so no test
depends on how long anything takes.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tfhelm.chart import chart_path
from tfhelm.cluster import deploy
from tfhelm.cluster.values import ClusterOptions
from tfhelm.helm import Helm, helm_executable
from tfhelm.kube import Kube
from tfhelm_dev import localcluster

from .conftest import job_of, wait_for

TFHELM = str(Path(sys.executable).parent / "tfhelm")
COMPLETE_AFTER = "tfhelm.io/kwok-complete-after"
SLOW = {"worker": {"podAnnotations": {COMPLETE_AFTER: "1h"}}}
NO_STORAGE = {"storage": {"data": {"enabled": False}, "logs": {"enabled": False}}}


# ----------------------------------------------------------------------------- helpers

@pytest.fixture(scope="module")
def batch(api_client) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture(scope="module")
def apps(api_client) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


def up(ns: str, name: str, *values: dict, workers: int = 2, ps: int = 1) -> None:
    """`tfhelm up` through its own code path: PS release `<name>-ps` + release `<name>`."""
    opts = ClusterOptions(name=name, namespace=ns, workers=workers, ps=ps, value_files=list(values))
    deploy.up(deploy.plan(opts), Helm(), Kube())


def helm_install(ns: str, name: str, *sets: str) -> None:
    """Plain `helm install` of the chart: ONE release holds everything (components=all)."""
    subprocess.run([helm_executable(), "install", name, str(chart_path()), "-n", ns, "--wait=false",
                    *[a for s in sets for a in ("--set", s)]], check=True, capture_output=True)


def reap(ns: str, name: str, *args: str, kubeconfig: str | None = None, timeout: float = 180):
    env = dict(os.environ, **({"KUBECONFIG": kubeconfig} if kubeconfig else {}))
    return subprocess.run([TFHELM, "reap", name, "-n", ns, *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def start_reap(ns: str, *args: str, kubeconfig: str | None = None) -> subprocess.Popen:
    env = dict(os.environ, **({"KUBECONFIG": kubeconfig} if kubeconfig else {}))
    return subprocess.Popen([TFHELM, "reap", *args, "-n", ns], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def first_line(proc: subprocess.Popen, timeout: float = 120) -> str:
    """The reaper's first line of output (without a terminal: its first look at the cluster)."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert box and box[0], f"the reaper printed nothing in {timeout:.0f}s (exit {proc.poll()})"
    return box[0]


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return out


def ps_pods(core, ns: str, name: str) -> list:
    return core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster={name},tfhelm.io/role=ps").items


def ps_objects(core, apps, ns: str, name: str) -> list[str]:
    sel = f"tfhelm.io/cluster={name},tfhelm.io/role=ps"
    return ([f"Deployment/{d.metadata.name}" for d in apps.list_namespaced_deployment(ns, label_selector=sel).items]
            + [f"Service/{s.metadata.name}" for s in core.list_namespaced_service(ns, label_selector=sel).items])


def wait_ps_running(core, ns: str, name: str, n: int) -> None:
    wait_for(lambda: len([p for p in ps_pods(core, ns, name) if p.status.phase == "Running"]) == n,
             90, what=f"{n} PS pods of {ns}/{name} running")


def wait_ps_gone(core, apps, ns: str, name: str) -> None:
    wait_for(lambda: not ps_objects(core, apps, ns, name) and not ps_pods(core, ns, name), 90,
             what=f"PS of {ns}/{name} gone")


def finish(core, ns: str, job: str, fail: bool = False) -> None:
    """Let every task of the Job finish now (kwok re-reads the delay annotation). All of them:
    a pod the Job controller or kwok had not yet created or started would otherwise keep its
    hour and the Job would never complete (on a loaded machine the second pod often lags)."""
    parallelism = client.BatchV1Api(core.api_client).read_namespaced_job(job, ns).spec.parallelism

    def pending_or_running():
        pods = [p for p in core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items
                if p.status.phase in ("Pending", "Running") and not p.metadata.deletion_timestamp]
        return pods if len(pods) >= parallelism else None

    pods = wait_for(pending_or_running, 60, what=f"the {parallelism} pods of {job}")
    for p in pods:
        patch = {"metadata": {"annotations": {COMPLETE_AFTER: "100ms"}}}
        if fail:
            patch["metadata"]["labels"] = {"tfhelm.io/kwok-fail": "true"}
        core.patch_namespaced_pod(p.metadata.name, ns, patch)


def events(core, ns: str, reason: str, job: str | None = None) -> list:
    sel = f"reason={reason}" + (f",involvedObject.name={job}" if job else "")
    return core.list_namespaced_event(ns, field_selector=sel).items


def releases(ns: str) -> list[str]:
    out = subprocess.run([helm_executable(), "list", "-n", ns, "-q"], check=True,
                         capture_output=True, text=True).stdout
    return sorted(out.split())


# ----------------------------------------------------------------------------- success

def test_between_graph_success_with_up_reap(core, apps, batch, namespace):
    """`tfhelm up --reap`: the workers' Job completes, the PS release goes, data stays."""
    env = dict(os.environ)
    values = Path(f"/tmp/{namespace}-values.yaml")
    values.write_text(yaml.safe_dump({"reaper": {"grace": 1}}))
    res = subprocess.run([TFHELM, "up", "--name", "a", "-n", namespace, "--workers", "2", "--ps", "2",
                          "-f", str(values), "--reap"], env=env, capture_output=True, text=True,
                         timeout=240)
    values.unlink()
    assert res.returncode == 0, res.stderr
    assert "uninstalled release" in res.stderr and "TFClusterReaped" not in res.stderr
    wait_ps_gone(core, apps, namespace, "a")
    assert releases(namespace) == ["a"], "the workload release stays"
    job = batch.read_namespaced_job(job_of(namespace, "a", "worker"), namespace)
    assert job.status.succeeded == 2, "the finished Job stays, for its logs"
    pvcs = {p.metadata.name for p in core.list_namespaced_persistent_volume_claim(namespace).items}
    assert {"a-data", "a-logs"} <= pvcs
    [ev] = events(core, namespace, "TFClusterReaped", job_of(namespace, "a", "worker"))
    assert ev.type == "Normal" and "a-ps" in ev.message
    status = subprocess.run([TFHELM, "status", "a", "-n", namespace], capture_output=True, text=True)
    assert status.returncode == 0 and "TFClusterReaped" in status.stdout, status.stdout


def test_in_graph_success_stops_worker_servers(core, apps, batch, namespace):
    """In-graph: the chief decides; workers only serve, so their Job is suspended."""
    up(namespace, "ig", SLOW, NO_STORAGE, {"mode": "in-graph", "chief": {"enabled": True}}, ps=2)
    wait_for(lambda: len([p for p in core.list_namespaced_pod(namespace, label_selector=f"job-name={job_of(namespace, 'ig', 'worker')}").items
                          if p.status.phase == "Running"]) == 2, 60, what="worker servers running")
    res = reap(namespace, "ig", "--grace", "1")  # the chief completes on its own (kwok: 3s)
    assert res.returncode == 0, res.stderr
    wait_ps_gone(core, apps, namespace, "ig")
    workers = batch.read_namespaced_job(job_of(namespace, "ig", "worker"), namespace)
    assert workers.spec.suspend is True
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector=f"job-name={job_of(namespace, 'ig', 'worker')}").items,
             60, what="worker server pods gone")
    assert batch.read_namespaced_job(job_of(namespace, "ig", "chief"), namespace).status.succeeded == 1
    [ev] = events(core, namespace, "TFClusterReaped", job_of(namespace, "ig", "chief"))
    assert f"suspended Job {job_of(namespace, 'ig', 'worker')}" in ev.message


# ----------------------------------------------------------------------------- failure

@pytest.mark.parametrize("policy", ["keep", "reap"])
def test_failure_policy(core, apps, namespace, policy):
    up(namespace, "f", SLOW, NO_STORAGE, {"worker": {"backoffLimitPerIndex": 0}})
    wait_ps_running(core, namespace, "f", 1)
    finish(core, namespace, job_of(namespace, "f", "worker"), fail=True)
    res = reap(namespace, "f", "--grace", "1", "--on-failure", policy)
    assert res.returncode == 1, res.stderr
    assert "training failed" in res.stderr and f"{job_of(namespace, 'f', 'worker')} failed" in res.stderr
    if policy == "keep":
        assert ps_objects(core, apps, namespace, "f"), "the PS stay for debugging"
        assert "f-ps" in releases(namespace)
        [ev] = events(core, namespace, "TFClusterKept", job_of(namespace, "f", "worker"))
        assert ev.type == "Warning" and "keeping the parameter servers" in ev.message
    else:
        wait_ps_gone(core, apps, namespace, "f")
        [ev] = events(core, namespace, "TFClusterReaped", job_of(namespace, "f", "worker"))
        assert ev.type == "Warning"


# ----------------------------------------------------------------------------- robustness

def test_killed_mid_grace_and_restarted(core, apps, namespace):
    up(namespace, "k", SLOW, NO_STORAGE, ps=2)
    wait_ps_running(core, namespace, "k", 2)
    first = start_reap(namespace, "k", "--grace", "20")
    finish(core, namespace, job_of(namespace, "k", "worker"))
    wait_for(lambda: events(core, namespace, "TFClusterReaping"), 90, what="the grace period started")
    first.kill()  # SIGKILL: no chance to clean up
    first.communicate(timeout=30)
    assert len(ps_objects(core, apps, namespace, "k")) == 4, "killed within the grace: nothing removed"
    res = reap(namespace, "k", "--grace", "20")  # the grace continues where it was
    assert res.returncode == 0, res.stderr
    wait_ps_gone(core, apps, namespace, "k")
    assert len(events(core, namespace, "TFClusterReaping")) == 1
    assert len(events(core, namespace, "TFClusterReaped")) == 1
    again = reap(namespace, "k", "--grace", "20")  # and once more, after the end: a no-op
    assert again.returncode == 0 and "already gone" in again.stderr, again.stderr
    assert len(events(core, namespace, "TFClusterReaped")) == 1


def test_api_server_restarted_while_watching(core, apps, namespace, external_cluster):
    if external_cluster:
        pytest.skip("restarts the local cluster's kube-apiserver")
    up(namespace, "r", SLOW, NO_STORAGE)
    wait_ps_running(core, namespace, "r", 1)
    wait_for(lambda: events(core, namespace, "SuccessfulCreate", job_of(namespace, "r", "worker")), 30, what="workers")
    proc = start_reap(namespace, "r", "--grace", "1")
    first = first_line(proc)  # past its Helm checks: it has listed the Jobs and watches them
    localcluster.restart_apiserver()
    finish(core, namespace, job_of(namespace, "r", "worker"))  # the outcome arrives on the new connection
    out = first + proc.communicate(timeout=180)[0]
    assert proc.returncode == 0, out
    assert "unreachable" in out and "watching again" in out, out
    wait_ps_gone(core, apps, namespace, "r")


def test_two_clusters_in_one_namespace_reaped_independently(core, apps, batch, namespace):
    up(namespace, "one", SLOW, NO_STORAGE)
    up(namespace, "two", SLOW, NO_STORAGE)
    wait_ps_running(core, namespace, "one", 1)
    wait_ps_running(core, namespace, "two", 1)
    proc = start_reap(namespace, "--all", "--grace", "1")  # one watch for the namespace
    try:
        finish(core, namespace, job_of(namespace, "one", "worker"))
        wait_ps_gone(core, apps, namespace, "one")
        assert len(ps_objects(core, apps, namespace, "two")) == 2, "the other cluster is untouched"
        assert not events(core, namespace, "TFClusterReaped", job_of(namespace, "two", "worker"))
        finish(core, namespace, job_of(namespace, "two", "worker"))
        wait_ps_gone(core, apps, namespace, "two")
        # The Event is the reap's last step (after Helm's cleanup of the release).
        wait_for(lambda: events(core, namespace, "TFClusterReaped", job_of(namespace, "two", "worker")), 60, what="the Event")
    finally:
        out = stop(proc)
    assert out.count("reaped:") == 2, out
    assert releases(namespace) == ["one", "two"]
    assert len(events(core, namespace, "TFClusterReaped", job_of(namespace, "one", "worker"))) == 1
    assert len(events(core, namespace, "TFClusterReaped", job_of(namespace, "two", "worker"))) == 1


def test_one_release_cluster_is_reaped_directly(core, apps, namespace):
    """`helm install` of the whole chart: no `<name>-ps` release, so the PS objects are deleted."""
    helm_install(namespace, "solo", "ps.replicas=2", "worker.replicas=2", "storage.data.enabled=false",
                 "storage.logs.enabled=false")
    wait_ps_running(core, namespace, "solo", 2)
    res = reap(namespace, "solo", "--grace", "1")
    assert res.returncode == 0, res.stderr
    assert "deleted Deployment solo-ps-0" in res.stderr
    wait_ps_gone(core, apps, namespace, "solo")
    assert releases(namespace) == ["solo"]


# ----------------------------------------------------------------------------- in-cluster RBAC

def token_kubeconfig(core, ns: str, sa: str, path: Path) -> str:
    """A kubeconfig that authenticates as the ServiceAccount (a TokenRequest token); beside it
    the account's files as a pod mounts them (`token`, `ca.crt`)."""
    token = core.create_namespaced_service_account_token(
        sa, ns, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
            audiences=[], expiration_seconds=3600))).status.token
    admin = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())
    cluster = next(c for c in admin["clusters"])
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": sa, "context": {"cluster": cluster["name"], "user": sa, "namespace": ns}}],
        "current-context": sa}))
    (path.parent / "token").write_text(token)
    ca = cluster["cluster"]
    (path.parent / "ca.crt").write_bytes(base64.b64decode(ca["certificate-authority-data"])
                                         if "certificate-authority-data" in ca else Path(ca["certificate-authority"]).read_bytes())
    return str(path)


def forbidden(call, *args, **kwargs) -> bool:
    try:
        call(*args, **kwargs)
    except ApiException as e:
        return e.status == 403
    return False


def reaper_command(apps, ns: str, name: str, account: Path) -> list[str]:
    """The in-cluster reaper's exact command line, as the chart rendered it: the chart's
    program run here (-I: without tfhelm installed, as in the task image), with the files of
    its ServiceAccount as its pod would mount them."""
    c = apps.read_namespaced_deployment(f"{name}-reaper", ns).spec.template.spec.containers[0]
    assert c.command == ["python3", "/etc/tfhelm/reaper.py"]
    config = client.CoreV1Api(apps.api_client).read_namespaced_config_map(f"{name}-tfconfig", ns)
    mounted = account / "etc-tfhelm"  # what its pod mounts at /etc/tfhelm
    mounted.mkdir()
    for key, text in config.data.items():
        (mounted / key).write_text(text)
    server = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())["clusters"][0]["cluster"]["server"]
    return [sys.executable, "-I", str(mounted / "reaper.py"), *c.args, f"--server={server}",
            f"--service-account={account}"]


@pytest.mark.parametrize("form", ["split-in-graph", "one-release"])
def test_in_cluster_reaper_rbac_is_sufficient_and_minimal(core, apps, batch, namespace, tmp_path, form):
    name = "ic"
    if form == "split-in-graph":
        up(namespace, name, SLOW, NO_STORAGE, {"mode": "in-graph", "chief": {"enabled": True},
                                               "reaper": {"enabled": True, "grace": 1}}, ps=2)
    else:  # without the lost-tasks rule (nodeFailure.replaceLostTasks), it may touch no pod
        helm_install(namespace, name, "ps.replicas=2", "worker.replicas=2", "reaper.enabled=true",
                     "reaper.grace=1", "storage.data.enabled=false", "storage.logs.enabled=false",
                     "nodeFailure.replaceLostTasks=false")
        finish(core, namespace, job_of(namespace, name, "worker"))
    # The reaper's pod passed admission in a namespace enforcing Pod Security "restricted".
    wait_for(lambda: core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/component=reaper").items,
             60, what="the reaper's pod")
    wait_ps_running(core, namespace, name, 2)
    kc = token_kubeconfig(core, namespace, f"{name}-reaper", tmp_path / "reaper.kubeconfig")
    as_reaper = config.new_client_from_config(config_file=kc)
    r_core, r_apps, r_batch = client.CoreV1Api(as_reaper), client.AppsV1Api(as_reaper), client.BatchV1Api(as_reaper)

    # Minimal: what it must never do.
    assert forbidden(r_batch.delete_namespaced_job, job_of(namespace, name, "worker"), namespace)
    assert forbidden(r_batch.patch_namespaced_job, f"{name}-chief", namespace, {"spec": {"suspend": True}})
    assert forbidden(r_apps.delete_namespaced_deployment, "other-ps-0", namespace)
    assert forbidden(r_apps.delete_namespaced_deployment, f"{name}-reaper", namespace)
    assert forbidden(r_core.delete_namespaced_service, f"{name}-worker", namespace)
    ps_pod = core.list_namespaced_pod(namespace, label_selector=f"tfhelm.io/cluster={name},tfhelm.io/role=ps").items[0]
    assert forbidden(r_core.read_namespaced_pod, ps_pod.metadata.name, namespace)  # pods: never by name
    if form == "one-release":  # with the lost-tasks rule, patch and delete (tests/cluster/test_lost_tasks.py)
        assert forbidden(r_core.delete_namespaced_pod, ps_pod.metadata.name, namespace)
    assert forbidden(r_core.list_namespaced_persistent_volume_claim, namespace)
    assert forbidden(r_core.delete_namespaced_config_map, f"{name}-tfconfig", namespace)
    assert forbidden(r_batch.list_namespaced_job, "default")
    assert forbidden(r_core.create_namespaced_pod, namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="x"), spec=client.V1PodSpec(containers=[client.V1Container(name="x", image="x")])))
    # No Secret at all: not the notebook token, not any release's record (its own either).
    assert forbidden(r_core.list_namespaced_secret, namespace)
    assert forbidden(r_core.read_namespaced_secret, f"sh.helm.release.v1.{name}-ps.v1", namespace)
    assert forbidden(r_core.delete_namespaced_secret, f"sh.helm.release.v1.{name}-ps.v1", namespace)
    if form == "one-release":
        assert forbidden(r_batch.patch_namespaced_job, job_of(namespace, name, "worker"), namespace, {"spec": {"suspend": True}})

    # Sufficient: the reaper's own command line, with its own token, does the whole job.
    proc = subprocess.Popen(reaper_command(apps, namespace, name, tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deciding = job_of(namespace, name, "chief") if form == "split-in-graph" else job_of(namespace, name, "worker")
        wait_for(lambda: events(core, namespace, "TFClusterReaped", deciding), 120, what="TFClusterReaped")
        wait_ps_gone(core, apps, namespace, name)
    finally:
        out = stop(proc)
    assert "failed" not in out and "forbidden" not in out.lower(), out
    assert "no read access to pods" not in out, out  # it decided from the pods' watch too
    if form == "split-in-graph":
        # The PS release's record stays (the reaper may not touch Secrets); `tfhelm down`
        # or the next `tfhelm up` deals with it.
        assert f"{name}-ps" in releases(namespace)
        assert batch.read_namespaced_job(job_of(namespace, name, "worker"), namespace).spec.suspend is True
    else:
        assert releases(namespace) == [name]


def test_reap_of_a_missing_cluster_exits_cleanly_every_time(namespace):
    """Its watch thread is stopped and joined before the command ends: one still blocked in
    a TLS read at exit made the interpreter abort (exit 134) in some runs."""
    from tfhelm.console import err
    from tfhelm.errors import SpecError
    from tfhelm.reaper import default_config
    from tfhelm.reaper.console import run_reaper

    with pytest.raises(SpecError):
        run_reaper(Kube(), namespace, "nosuch", default_config(), err)
    assert not [t for t in threading.enumerate() if t.name.startswith("tfhelm-watch-")]
    runs = [subprocess.Popen([TFHELM, "reap", "nosuch", "-n", namespace], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for proc in runs:
        out, errors = proc.communicate(timeout=120)
        assert proc.returncode == 2 and "no TF cluster 'nosuch'" in errors and "Fatal" not in errors, errors
