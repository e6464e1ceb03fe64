"""A user's workspace on the real node: Jupyter answers with its token and refuses without,
the code written in the notebook is served by the file server to a TF cluster that
imports a sibling module, checked by its SHA-256, a run's extra package comes from a wheel
directory there, and TensorBoard lists the run."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from tfhelm import users

from tests.cluster.conftest import job_of
from tests.helpers.wheels import make_wheel

from .conftest import pod_logs, run, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def user(kubeconfig):
    name = f"w{uuid.uuid4().hex[:6]}"
    run("tfhelm", "user", "add", name, "--timeout", "300")
    yield name
    run("tfhelm", "user", "remove", name, "--purge")


def test_workspace_notebook_files_and_tensorboard(user, core, api_client, tmp_path):
    ns = users.user_namespace(user)
    urls = dict(line.split(":", 1) for line in run("tfhelm", "user", "url", user).stdout.splitlines())
    notebook, tensorboard = urls["notebook"].strip(), urls["tensorboard"].strip()
    base, token = notebook.split("/?token=")

    # Jupyter: the token opens it, nothing else does.
    assert get(f"{base}/api/status?token={token}")[0] == 200
    assert get(f"{base}/api/status")[0] == 403
    assert get(f"{base}/api/status?token=not-{token}")[0] == 403

    # The code, as written in the notebook: copied onto the code volume through its pod.
    pod = core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/component=notebook").items[0]
    workdir = next(a.split("=", 1)[1] for a in pod.spec.containers[0].args if a.startswith("--notebook-dir="))
    for f in ("ps_between_graph.py", "tfhelm_example.py"):
        run("kubectl", "cp", "-n", ns, str(EXAMPLES / f), f"{pod.metadata.name}:{workdir}/{f}")
    sha = hashlib.sha256((EXAMPLES / "ps_between_graph.py").read_bytes()).hexdigest()

    # A wrong checksum stops the task before it runs anything.
    run("tfhelm", "up", "--user", user, "--name", "bad", "--workers", "1", "--ps", "1",
        "--script", "ps_between_graph.py", "--set", f"code.sha256={'0' * 64}")
    failed = wait_for(lambda: [p for p in core.list_namespaced_pod(ns, label_selector="tfhelm.io/cluster=bad").items
                               if any(s.state.terminated and s.state.terminated.exit_code
                                      for s in p.status.init_container_statuses or [])], 300,
                      what="the fetch init container to fail")
    log = core.read_namespaced_pod_log(failed[0].metadata.name, ns, container="fetch-code")
    assert "does not match" in log
    run("tfhelm", "down", "bad", "-n", ns)

    # The right one: the workers fetch the script and its sibling module, and train.
    run("tfhelm", "up", "--user", user, "--name", "run1", "--workers", "2", "--ps", "1",
        "--script", "ps_between_graph.py", "--set", f"code.sha256={sha}",
        "--", "--steps", "40", "--checkpoint-every", "20")
    batch = client.BatchV1Api(api_client)
    workers = job_of(ns, "run1", "worker")  # named by the cluster's generation

    def done():
        job = batch.read_namespaced_job(workers, ns)
        return job.status.succeeded == 2 or job.status.failed
    wait_for(done, 600, interval=2, what="run1's workers")
    logs = pod_logs(core, ns, "tfhelm.io/cluster=run1,app.kubernetes.io/component=worker")
    assert batch.read_namespaced_job(workers, ns).status.succeeded == 2, logs
    assert all("tfhelm_example.py" in text and f"sha256 {sha}" in text for text in logs.values()), logs

    # Jupyter users type `python` and `pip`; a run's extra package comes from a wheel directory
    # on the code volume, through the file server (the local cluster has no route out).
    for tool in (["python", "--version"], ["pip", "--version"]):
        run("kubectl", "exec", "-n", ns, pod.metadata.name, "--", *tool)
    make_wheel(tmp_path / "wheels", "tfhelm_probe", "1.0", "ANSWER = 42\n")
    (tmp_path / "probe.py").write_text("import tfhelm_probe\nprint('the answer is', tfhelm_probe.ANSWER)\n")
    run("kubectl", "cp", "-n", ns, str(tmp_path / "wheels"), f"{pod.metadata.name}:{workdir}/wheels")
    run("kubectl", "cp", "-n", ns, str(tmp_path / "probe.py"), f"{pod.metadata.name}:{workdir}/probe.py")
    run("tfhelm", "up", "--user", user, "--name", "pkg", "--workers", "1", "--ps", "0", "--script", "probe.py",
        "--pip", "tfhelm_probe==1.0", "--pip-find-links", "wheels", "--wait", "--timeout", "600")
    assert any("the answer is 42" in text for text in pod_logs(core, ns, "tfhelm.io/cluster=pkg").values())

    # TensorBoard reads the user's logs volume: the run is there.
    runs = wait_for(lambda: [r for r in json.loads(get(f"{tensorboard.rstrip('/')}/data/runs")[1])
                             if r.startswith("run1")], 120, interval=2, what="TensorBoard to list run1")
    assert runs
