"""Fixtures for the `cluster` tier: a real API server and controllers, kwok nodes (and
the real nodes, which the `realpods` tier uses).

The session starts the local cluster (tfhelm_dev.localcluster) once and stops it at
the end, unless it was already running (then it is left alone) or
TFHELM_TEST_KUBECONFIG names another cluster (kind, a real one: then nothing is
started or stopped). Each test gets its own namespace that enforces Pod Security
"restricted".
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Callable, TypeVar

import pytest
from kubernetes import client, config
from kubernetes.config import kube_config
from kubernetes.client.rest import ApiException

from tfhelm_dev import localcluster

HERE = Path(__file__).parent
T = TypeVar("T")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.cluster)


def wait_for(check: Callable[[], T], timeout: float = 60, interval: float = 0.5,
             what: str = "condition") -> T:
    """Poll check() until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def job_of(namespace: str, cluster: str, role: str, timeout: float = 60) -> str:
    """The name of a cluster's current Job of a role (Job names carry the cluster's
    generation, a hash of its values): the newest one not being deleted."""
    batch = client.BatchV1Api(config.new_client_from_config())

    def current():
        jobs = [j for j in batch.list_namespaced_job(
            namespace, label_selector=f"tfhelm.io/cluster={cluster},tfhelm.io/role={role}").items
            if not j.metadata.deletion_timestamp]
        return max(jobs, key=lambda j: j.metadata.creation_timestamp).metadata.name if jobs else None
    return wait_for(current, timeout, what=f"the {role} Job of {namespace}/{cluster}")


@pytest.fixture(scope="session")
def external_cluster() -> bool:
    """True when the tests run against TFHELM_TEST_KUBECONFIG, not the local cluster."""
    return bool(os.environ.get("TFHELM_TEST_KUBECONFIG"))


@pytest.fixture(scope="session")
def kubeconfig(external_cluster: bool):
    """Path of a kubeconfig for a running cluster, also exported as KUBECONFIG."""
    started = False
    if external_cluster:
        path = Path(os.environ["TFHELM_TEST_KUBECONFIG"]).expanduser().resolve()
    else:
        started = localcluster.status() is None
        try:
            path = localcluster.up().kubeconfig
        except localcluster.LocalClusterError as e:
            pytest.fail(f"local cluster did not start: {e}", pytrace=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KUBECONFIG", str(path))  # for helm, kubectl and tfhelm subprocesses
        # The kubernetes client reads KUBECONFIG once, at import: in-process
        # load_kube_config()/new_client_from_config() need the default patched too.
        mp.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
        yield path
    if started:
        localcluster.down()
        assert not localcluster.leftovers(), "`tfhelm cluster down` left these behind"


@pytest.fixture(scope="session")
def api_client(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


@pytest.fixture(scope="session")
def batch(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture(scope="session")
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture(scope="session")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(request, core: client.CoreV1Api):
    """A fresh namespace enforcing Pod Security "restricted", deleted afterwards. Its pods
    go to the simulated (kwok) nodes: this tier checks what the API server and the
    controllers do with them (tests/realpods runs them for real)."""
    name = f"t-{request.node.name[:40].lower().replace('_', '-').strip('-')}-{uuid.uuid4().hex[:6]}"
    name = "".join(c if c.isalnum() or c == "-" else "-" for c in name)
    labels = {f"pod-security.kubernetes.io/{mode}": "restricted"
              for mode in ("enforce", "warn", "audit")}
    labels["pod-security.kubernetes.io/enforce-version"] = "latest"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=name, labels=labels, annotations=localcluster.SIMULATED_NAMESPACE_ANNOTATIONS)))

    def default_sa():  # pods are refused until the ServiceAccount controller made it
        try:
            return core.read_namespaced_service_account("default", name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
    wait_for(default_sa, 30, what=f"serviceaccount {name}/default")
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as e:
        if e.status != 404:
            raise
