"""A user's workspace on the user node: Jupyter answers with its token and refuses without,
and its NodePorts answer on the user node's address only; the code written in the notebook
is served by the file server to a TF cluster on the training nodes that imports a sibling
module, checked by its SHA-256, a run's extra package comes from a wheel directory there,
and TensorBoard lists the run to its owner only (another user and an anonymous client get
403/401, over the node port and the pod network). Removing the user leaves the
still-running parameter server fenced in. The notebook drives an in-graph cluster on the
training nodes as its chief."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path

from kubernetes import client

from tfhelm.workspace import userspec

from tests.cluster.conftest import job_of
from tests.helpers.wheels import make_wheel

from tests.tf.helpers import events, latest_checkpoint_step, metrics

from .conftest import TASKS, login_token, pod_logs, probe, run, volume_dir, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def get(url: str, token: str | None = None, timeout: float = 10) -> tuple[int, bytes]:
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def answers(url: str) -> bool:
    """True if an HTTP server answers there at all (any status)."""
    try:
        get(url, timeout=3)
        return True
    except OSError:  # refused, dropped, unreachable
        return False


def notebook_pod(core, ns: str):
    return core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/component=notebook").items[0]


def copy_into_notebook(core, ns: str, *files: str) -> str:
    """Copy examples into the notebook's work directory, as if written there; returns it."""
    pod = notebook_pod(core, ns)
    workdir = next(a.split("=", 1)[1] for a in pod.spec.containers[0].args if a.startswith("--notebook-dir="))
    for f in files:
        run("kubectl", "cp", "-n", ns, str(EXAMPLES / f), f"{pod.metadata.name}:{workdir}/{f}")
    return workdir


def test_workspace_notebook_files_and_tensorboard(two_users, core, api_client, tmp_path, nodes):
    user, other = two_users
    ns = userspec.user_namespace(user)
    urls = dict(line.split(":", 1) for line in run("tfhelm", "user", "url", user).stdout.splitlines())
    notebook, tensorboard = urls["notebook"].strip(), urls["tensorboard"].strip()
    base, token = notebook.split("/?token=")
    assert tensorboard.endswith(f"/?token={token}")  # TensorBoard is behind the same login
    tensorboard = tensorboard.split("?")[0]

    # Jupyter: the token opens it, nothing else does.
    assert get(f"{base}/api/status?token={token}")[0] == 200
    assert get(f"{base}/api/status")[0] == 403
    assert get(f"{base}/api/status?token=not-{token}")[0] == 403

    # The workspace runs on the user node, whose address alone answers its NodePorts
    # (externalTrafficPolicy: Local): the training nodes' do not.
    workspace = core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/instance=user-env").items
    assert {p.spec.node_name for p in workspace} == {nodes.user}
    for component in ("notebook", "tensorboard"):
        port = core.read_namespaced_service(userspec.component_name(component), ns).spec.ports[0].node_port
        assert answers(f"http://{nodes.addresses[nodes.user]}:{port}/"), component
        for node in nodes.training:
            assert not answers(f"http://{nodes.addresses[node]}:{port}/"), (component, node)

    # The code, as written in the notebook: copied onto the code volume through its pod.
    workdir = copy_into_notebook(core, ns, "ps_between_graph.py", "tfhelm_example.py")
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
    trained = core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster=run1,{TASKS}").items
    assert {p.spec.node_name for p in trained} <= set(nodes.training)  # fetched across nodes

    # Jupyter users type `python` and `pip`; a run's extra package comes from a wheel directory
    # on the code volume, through the file server (the local cluster has no route out).
    pod = notebook_pod(core, ns)
    for tool in (["python", "--version"], ["pip", "--version"]):
        run("kubectl", "exec", "-n", ns, pod.metadata.name, "--", *tool)
    make_wheel(tmp_path / "wheels", "tfhelm_probe", "1.0", "ANSWER = 42\n")
    (tmp_path / "probe.py").write_text("import tfhelm_probe\nprint('the answer is', tfhelm_probe.ANSWER)\n")
    run("kubectl", "cp", "-n", ns, str(tmp_path / "wheels"), f"{pod.metadata.name}:{workdir}/wheels")
    run("kubectl", "cp", "-n", ns, str(tmp_path / "probe.py"), f"{pod.metadata.name}:{workdir}/probe.py")
    run("tfhelm", "up", "--user", user, "--name", "pkg", "--workers", "1", "--ps", "0", "--script", "probe.py",
        "--pip", "tfhelm_probe==1.0", "--pip-find-links", "wheels", "--wait", "--timeout", "600")
    assert any("the answer is 42" in text for text in pod_logs(core, ns, "tfhelm.io/cluster=pkg").values())

    # TensorBoard reads the user's logs volume: the run is there, for its owner.
    runs_url = f"{tensorboard}data/runs"
    runs = wait_for(lambda: [r for r in json.loads(get(runs_url, token)[1]) if r.startswith("run1")],
                    120, interval=2, what="TensorBoard to list run1")
    assert runs
    # Over the node port: nobody else reads it, with or without a token of their own.
    bobs = login_token(core, other)
    assert get(runs_url)[0] == 401 and get(runs_url, bobs)[0] == 403
    assert get(f"{tensorboard}?token={bobs}")[0] == 403
    # Over the pod network (the exposed port admits any source): the same answers.
    in_cluster = f"http://{userspec.component_name('tensorboard')}.{ns}.svc:6006/data/runs"
    anonymous, bob = probe(core, userspec.user_namespace(other), [(in_cluster, None, 30), (in_cluster, bobs, 1)])
    assert (anonymous, bob) == ("REACHED 401", "REACHED 403")
    (owner,) = probe(core, ns, [(in_cluster, token, 30)])
    assert owner.startswith("REACHED 200") and "run1" in owner, owner

    # The user is removed; run1's parameter server (never reaped) keeps running, and stays
    # fenced in: the other user still cannot reach it, its own namespace still can.
    run("tfhelm", "user", "remove", user)
    ps = f"tcp://run1-ps-0.{ns}.svc:2222"
    (from_other,) = probe(core, userspec.user_namespace(other), [(ps, None, 1)])
    assert from_other.startswith("BLOCKED") and "gaierror" not in from_other, from_other
    assert probe(core, ns, [(ps, None, 30)]) == ["REACHED tcp"]


def test_the_notebook_on_the_user_node_drives_an_in_graph_cluster_on_the_training_nodes(two_users, core, nodes):
    """The README's recipe, run in the notebook's own container: an in-graph cluster of
    servers only (the PS on one training node, the workers on the other), and the notebook
    as its ParameterServerStrategy chief, with the TF_CONFIG `tfhelm tfconfig --client`
    gives it from inside the workspace."""
    user = two_users[1]  # the first one was removed by the test before
    ns = userspec.user_namespace(user)
    ps_node, worker_node = nodes.training
    run("tfhelm", "up", "--user", user, "--name", "nb", "--in-graph", "--workers", "2", "--ps", "1",
        *nodes.pin("ps", ps_node), *nodes.pin("worker", worker_node))

    def serving():  # the servers never finish: wait for them to be up, not for a training
        pods = core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster=nb,{TASKS}").items
        return len(pods) == 3 and all(any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
                                      for p in pods) and pods
    servers = wait_for(serving, 300, interval=1, what="nb's worker and PS servers")
    workdir = copy_into_notebook(core, ns, "ps_in_graph.py", "tfhelm_example.py")
    chief = (
        'me="$(python -c \'import socket; print(socket.gethostbyname(socket.gethostname()))\'):2222" && '
        'TF_CONFIG="$(tfhelm tfconfig nb --client "$me")" TFHELM_DATA_DIR=/data/nb TFHELM_LOG_DIR=/log/nb '
        'python "$1/ps_in_graph.py" --steps 40 --checkpoint-every 20')
    out = run("kubectl", "exec", "-n", ns, notebook_pod(core, ns).metadata.name, "--",
              "sh", "-c", chief, "sh", workdir, timeout=600)
    assert "trained steps 0..40" in out.stdout + out.stderr, out.stdout + out.stderr
    logs_dir = volume_dir(core, ns, userspec.claim_name("logs")) / "nb"
    assert events(metrics(logs_dir, "chief-0"), "done")
    assert latest_checkpoint_step(logs_dir / "checkpoints") == 40
    where = {(p.metadata.labels["app.kubernetes.io/component"], p.spec.node_name) for p in servers}
    assert where == {("ps", ps_node), ("worker", worker_node)}, where
    assert notebook_pod(core, ns).spec.node_name == nodes.user
