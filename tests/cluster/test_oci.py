"""The charts through an OCI registry: `make publish` pushes the versioned archives to a
real registry server (distribution, built from its Go module, on 127.0.0.1), `helm pull`
gets the same bytes back, and `helm install oci://...` makes a cluster on the local
Kubernetes."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tfhelm.chart import chart_version
from tfhelm.helm import helm_executable

from .conftest import job_of, wait_for

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """`registry serve` on 127.0.0.1 with filesystem storage; yields `127.0.0.1:PORT`."""
    binary = REPO / "bin" / "registry"
    assert binary.exists(), "bin/registry missing: `make registry` builds it"
    tmp = tmp_path_factory.mktemp("registry")
    port = free_port()
    (tmp / "config.yml").write_text(json.dumps({  # JSON is YAML
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(tmp / "data")}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    log = open(tmp / "registry.log", "w")
    proc = subprocess.Popen([str(binary), "serve", str(tmp / "config.yml")], stdout=log, stderr=subprocess.STDOUT)

    def up():
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2).status == 200
        except OSError:
            assert proc.poll() is None, (tmp / "registry.log").read_text()
            return False
    wait_for(up, 30, what="registry on 127.0.0.1")
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)
    log.close()


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([helm_executable(), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def published(registry, tmp_path_factory):
    """`make publish` to the local registry; returns dist/charts of that run."""
    dist = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "MAKEFLAGS": ""}
    res = subprocess.run(["make", "-s", "publish", f"DIST={dist}", f"OCI_REPO=oci://{registry}/charts",
                          "HELM_PUSH_FLAGS=--plain-http"], cwd=REPO, capture_output=True, text=True, env=env,
                         timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return dist / "charts"


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("chart", ["tf-cluster", "user-env"])
def test_publish_pushes_versioned_archives_and_pull_gets_the_same_bytes(registry, published, chart, tmp_path):
    version = chart_version(chart)
    pushed = published / f"{chart}-{version}.tgz"
    assert pushed.is_file()
    pulled = helm("pull", f"oci://{registry}/charts/{chart}", "--version", version, "--plain-http",
                  "-d", str(tmp_path))
    assert pulled.returncode == 0, pulled.stderr
    assert sha256(tmp_path / pushed.name) == sha256(pushed)
    shown = helm("show", "chart", f"oci://{registry}/charts/{chart}", "--version", version, "--plain-http")
    assert shown.returncode == 0 and f"version: {version}" in shown.stdout
    assert "artifacthub.io/changes" in shown.stdout  # the metadata travels with the chart
    with urllib.request.urlopen(f"http://{registry}/v2/charts/{chart}/tags/list") as r:
        assert version in json.load(r)["tags"]


def test_helm_install_from_oci_into_the_local_cluster(registry, published, namespace, api_client):
    from kubernetes import client

    version = chart_version("tf-cluster")
    res = helm("install", "oci-mnist", f"oci://{registry}/charts/tf-cluster", "--version", version,
               "--plain-http", "-n", namespace, "--set", "worker.replicas=3", "--set", "ps.replicas=1",
               "--wait", "--wait-for-jobs", "--timeout", "3m")
    assert res.returncode == 0, res.stderr
    listed = json.loads(helm("list", "-n", namespace, "-o", "json").stdout)
    assert [(r["name"], r["chart"], r["status"]) for r in listed] == [("oci-mnist", f"tf-cluster-{version}", "deployed")]
    job = client.BatchV1Api(api_client).read_namespaced_job(job_of(namespace, "oci-mnist", "worker"), namespace)
    assert job.status.succeeded == 3
    assert helm("uninstall", "oci-mnist", "-n", namespace, "--wait").returncode == 0
