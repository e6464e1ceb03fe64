"""Fixtures for the `realpods` tier: the chart's pods really run on the local cluster's
real nodes (kubelet, containerd, runc, CNI, CoreDNS; images built by `make images`): the user
node, where workspaces run, and two training nodes.

The cluster is the one the `cluster` tier uses (started once per session); these tests'
namespaces carry no simulation annotations, so their pods land on the real nodes.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster.conftest import api_client, core, external_cluster, kubeconfig, wait_for  # noqa: F401
from tfhelm.workspace import userspec
from tfhelm_dev import localcluster, localnode

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.realpods)


@dataclass(frozen=True)
class Nodes:
    """Where this tier places pods: the user node and the training nodes, by name."""

    user: str
    training: tuple[str, ...]
    addresses: dict[str, str]  # InternalIP by node name

    def pin(self, role: str, node: str) -> list[str]:
        """`tfhelm up` / `helm install` options placing a tf-cluster role on one node."""
        return ["--set-json", f"{role}.nodeSelector=" + json.dumps({"kubernetes.io/hostname": node})]

    @staticmethod
    def spread(role: str, cluster: str) -> list[str]:
        """Options placing a role's tasks of one cluster on different nodes, one per node."""
        term = {"labelSelector": {"matchLabels": {"tfhelm.io/cluster": cluster, "app.kubernetes.io/component": role}},
                "topologyKey": "kubernetes.io/hostname"}
        return ["--set-json", f"{role}.affinity=" + json.dumps(
            {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})]


@pytest.fixture(scope="session", autouse=True)
def nodes(request, kubeconfig, core, external_cluster) -> Nodes | None:
    """The user node and two training nodes; say so plainly if the cluster lacks them."""
    if not any(HERE in Path(i.path).parents for i in request.session.items):
        return None
    return find_nodes(core, external_cluster)


def find_nodes(core, external_cluster: bool) -> Nodes:
    """The local cluster's (or TFHELM_TEST_KUBECONFIG's) user node and two training nodes."""
    if not external_cluster and len(localcluster.real_nodes()) < localnode.MAX_NODES:
        pytest.fail(f"the realpods tier needs the local cluster's {localnode.MAX_NODES} real nodes "
                    f"(it runs {len(localcluster.real_nodes())}; `tfhelm cluster up --real-nodes 3`)",
                    pytrace=False)
    real = [n for n in core.list_node().items if (n.metadata.labels or {}).get("type") != "kwok"]
    key, value = localcluster.USER_NODE_LABEL
    user = [n.metadata.name for n in real if (n.metadata.labels or {}).get(key) == value]
    training = tuple(sorted(n.metadata.name for n in real if n.metadata.name not in user
                            and not any(t.effect == "NoSchedule" for t in n.spec.taints or [])))
    if len(user) != 1 or len(training) < 2:
        pytest.fail(f"the realpods tier needs one user node ({key}={value}) and two training "
                    f"nodes; found {user} and {list(training)}", pytrace=False)
    addresses = {n.metadata.name: next(a.address for a in n.status.addresses if a.type == "InternalIP")
                 for n in real}
    return Nodes(user[0], training[:2], addresses)


def run(*args: str, code: int = 0, timeout: float = 900, stdin: str | None = None) -> subprocess.CompletedProcess:
    """A command as people run it (tfhelm, helm, kubectl), in its own process."""
    exe = [sys.executable, "-m", "tfhelm", *args[1:]] if args[0] == "tfhelm" else list(args)
    result = subprocess.run(exe, capture_output=True, text=True, timeout=timeout, input=stdin,
                            cwd=ROOT, env=os.environ)
    assert result.returncode == code, f"{' '.join(args)} exited {result.returncode}:\n" \
                                      f"{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture
def namespace(request, core):
    """A fresh namespace enforcing Pod Security "restricted"; its pods run for real."""
    name = f"rp-{re.sub('[^a-z0-9]+', '-', request.node.name[5:30].lower()).strip('-')}-{uuid.uuid4().hex[:5]}"
    labels = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn", "audit")}
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    wait_for(lambda: _exists(lambda: core.read_namespaced_service_account("default", name)), 30,
             what=f"serviceaccount {name}/default")
    yield name
    releases = subprocess.run(["helm", "list", "-aq", "-n", name], capture_output=True, text=True).stdout.split()
    if releases:  # its Jobs go first: nothing waits on the namespace controller's pass
        subprocess.run(["helm", "uninstall", *releases, "-n", name, "--wait=false"], capture_output=True)
    try:
        core.delete_namespace(name)
    except ApiException as e:
        if e.status != 404:
            raise


def _exists(read) -> bool:
    try:
        read()
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise


# The TF tasks' pods of a cluster (with its `tfhelm.io/cluster=NAME`): not the in-cluster
# reaper's, which every cluster has.
TASKS = "tfhelm.io/role in (chief,worker,ps,evaluator)"


def volume_dir(core, namespace: str, claim: str) -> Path:
    """Where a PVC's volume lives on this machine (the local cluster's host-path volumes)."""
    pvc = wait_for(lambda: (c := core.read_namespaced_persistent_volume_claim(claim, namespace))
                   .spec.volume_name and c, 60, what=f"pvc {namespace}/{claim} bound")
    return Path(core.read_persistent_volume(pvc.spec.volume_name).spec.host_path.path)


def pod_logs(core, namespace: str, selector: str) -> dict[str, str]:
    """Every container log of the selected pods (init containers included), by pod."""
    logs = {}
    for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
        names = [c.name for c in (pod.spec.init_containers or []) + pod.spec.containers]
        logs[pod.metadata.name] = "\n".join(
            core.read_namespaced_pod_log(pod.metadata.name, namespace, container=c) for c in names
            if pod.status.phase != "Pending")
    return logs


@pytest.fixture(scope="session")
def two_users(kubeconfig):
    """Alice and Bob, each with a workspace (shared by the tier's tenancy tests: a workspace
    takes a while to start), purged at the end."""
    names = [f"a{uuid.uuid4().hex[:5]}", f"b{uuid.uuid4().hex[:5]}"]
    for u in names:
        run("tfhelm", "user", "add", u, "--timeout", "300")
    yield names
    for u in names:
        run("tfhelm", "user", "remove", u, "--purge")


def login_token(core, user: str) -> str:
    """The user's login token (the notebook's and TensorBoard's)."""
    secret = core.read_namespaced_secret(userspec.token_secret(), userspec.user_namespace(user))
    return base64.b64decode(secret.data[userspec.TOKEN_KEY]).decode()


PROBE = """
import json, socket, sys, time, urllib.error, urllib.request
from urllib.parse import urlsplit
for url, token, attempts in json.loads(sys.argv[1]):
    for attempt in range(attempts):  # a new Service's rules may take kube-proxy a moment
        try:
            if url.startswith("tcp://"):
                where = urlsplit(url)
                socket.create_connection((where.hostname, where.port), timeout=5).close()
                print("REACHED tcp")
            else:
                headers = {"Authorization": f"token {token}"} if token else {}
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
                    print("REACHED", r.status, " ".join(r.read(4000).decode(errors="replace").split()))
            break
        except urllib.error.HTTPError as e:
            print("REACHED", e.code)
            break
        except Exception as e:
            error = e
            time.sleep(2)
    else:
        print("BLOCKED", type(error).__name__, error)
"""


def probe(core, namespace: str, requests: list[tuple[str, str | None, int]]) -> list[str]:
    """What a pod in `namespace` gets for each (url, login token or None, attempts): a line
    'REACHED <status> <body>' (an HTTP answer; `tcp://host:port`: 'REACHED tcp') or
    'BLOCKED <error>'."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    security = client.V1SecurityContext(allow_privilege_escalation=False, run_as_non_root=True,
                                        run_as_user=1000, capabilities=client.V1Capabilities(drop=["ALL"]),
                                        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(restart_policy="Never", automount_service_account_token=False, containers=[
            client.V1Container(name="probe", image="tensorflow/tensorflow:2.21.0", security_context=security,
                               command=["python3", "-c", PROBE, json.dumps(requests)])])))
    wait_for(lambda: core.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed"),
             300, what=f"probe {namespace}/{name}")
    lines = core.read_namespaced_pod_log(name, namespace).splitlines()
    assert len(lines) == len(requests), lines
    return lines
