"""Exit codes against a real API server: RBAC refusals (403) are one line and exit 3 for
every command (the reaper stops instead of retrying forever); a failed training is exit 1."""

from __future__ import annotations

import os
import subprocess

import pytest
from kubernetes import client

from .conftest import job_of, wait_for
from .test_reaper import NO_STORAGE, SLOW, TFHELM, finish, token_kubeconfig, up


@pytest.fixture
def nobody(core, namespace, tmp_path) -> str:
    """A kubeconfig of a ServiceAccount bound to nothing: every request is a 403."""
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="nobody")))
    return token_kubeconfig(core, namespace, "nobody", tmp_path / "nobody.kubeconfig")


@pytest.mark.parametrize("args", [
    ["status", "mnist"],
    ["reap", "mnist", "--grace", "0"],
    ["up", "--name", "mnist", "--workers", "1", "--ps", "1"],
    ["down", "mnist"],
    ["user", "list"],
    ["user", "url", "alice"],
])
def test_forbidden_is_one_line_and_exit_3(nobody, namespace, args):
    if args[0] != "user":
        args = [*args, "-n", namespace]
    result = subprocess.run([TFHELM, *args], env=dict(os.environ, KUBECONFIG=nobody),
                            capture_output=True, text=True, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3, result.stderr
    assert len(lines) == 1 and "forbidden" in lines[0].lower(), result.stderr
    assert "Traceback" not in result.stderr and "retrying" not in result.stderr


def test_status_exits_1_for_a_failed_training(core, namespace):
    up(namespace, "f", SLOW, NO_STORAGE, {"worker": {"backoffLimitPerIndex": 0}}, ps=0)
    workers = job_of(namespace, "f", "worker")  # named by the cluster's generation
    finish(core, namespace, workers, fail=True)
    batch = client.BatchV1Api(core.api_client)
    wait_for(lambda: any(c.type == "Failed" and c.status == "True"
                         for c in batch.read_namespaced_job(workers, namespace).status.conditions or []),
             60, what="the workers' Job failed")
    result = subprocess.run([TFHELM, "status", "f", "-n", namespace], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "Failed" in result.stdout
