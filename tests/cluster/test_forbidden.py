"""RBAC refusals (403) on a real API server: every command says so in one line and exits 3;
the reaper stops instead of retrying forever."""

from __future__ import annotations

import os
import subprocess

import pytest
from kubernetes import client

from .test_reaper import TFHELM, token_kubeconfig


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
