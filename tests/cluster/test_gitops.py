"""examples/gitops/ against the real Argo CD and Flux CRDs (taken from their Go modules by
hack/gitops-crds.sh), with `kubectl apply --dry-run=server`: the API server checks every
object against the CRD's own schema. And kustomize `helmCharts` rendering the chart."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tfhelm.helm import helm_executable

from .conftest import wait_for


REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "gitops"


def kubectl_bin() -> str:
    local = REPO / "bin" / "kubectl"
    return str(local) if local.exists() else shutil.which("kubectl") or "kubectl"


def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_bin(), *args], input=stdin, capture_output=True, text=True,
                          env=os.environ, timeout=300)


@pytest.fixture(scope="module")
def crds(kubeconfig, tmp_path_factory):
    out = tmp_path_factory.mktemp("crds")
    made = subprocess.run([str(REPO / "hack" / "gitops-crds.sh"), str(out)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    files = sorted(out.glob("*.yaml"))
    names = [yaml.safe_load(f.read_text())["metadata"]["name"] for f in files]
    assert {"applications.argoproj.io", "gitrepositories.source.toolkit.fluxcd.io",
            "ocirepositories.source.toolkit.fluxcd.io", "helmreleases.helm.toolkit.fluxcd.io"} <= set(names)
    applied = kubectl("apply", "--server-side", "--force-conflicts", *sum((["-f", str(f)] for f in files), []))
    assert applied.returncode == 0, applied.stderr
    def established(name: str) -> bool:
        res = kubectl("get", "crd", name, "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}")
        return res.stdout == "True"
    for name in names:
        wait_for(lambda: established(name), 60, what=f"CRD {name} established")
    for ns in ("argocd", "team-a"):
        kubectl("create", "namespace", ns)
    yield names
    for ns in ("argocd", "team-a"):
        kubectl("delete", "namespace", ns, "--wait=false")
    kubectl("delete", "crd", *names, "--wait=false")


def dry_run(*paths: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    files = sum((["-f", str(p)] for p in paths), []) if paths else ["-f", "-"]
    return kubectl("apply", "--dry-run=server", "--validate=strict", *files, stdin=stdin)


@pytest.mark.parametrize("rel", ["argocd/applications-git.yaml", "argocd/applications-oci.yaml",
                                 "flux/git", "flux/oci"])
def test_examples_pass_server_side_validation_against_the_real_crds(crds, rel):
    res = dry_run(EXAMPLES / rel)
    assert res.returncode == 0, res.stderr
    created = [ln for ln in res.stdout.splitlines() if ln.endswith("(server dry run)")]
    expected = sum(1 for f in ([EXAMPLES / rel] if (EXAMPLES / rel).is_file() else sorted((EXAMPLES / rel).glob("*.yaml")))
                   for d in yaml.safe_load_all(f.read_text()) if d)
    assert len(created) == expected >= 1, res.stdout


@pytest.mark.parametrize("rel,path,bad", [
    ("flux/oci/helmrelease.yaml", ("spec", "chartRef", "kind"), "ConfigMap"),   # enum in the CRD
    ("flux/oci/source.yaml", ("spec", "layerSelector", "operation"), "unzip"),  # enum in the CRD
    ("argocd/applications-git.yaml", ("spec", "source", "helm", "valuesObjectz"), {}),  # unknown field
])
def test_the_crd_schemas_are_really_enforced(crds, rel, path, bad):
    """The dry runs above could pass on a CRD without a schema: prove they would not."""
    doc = next(d for d in yaml.safe_load_all((EXAMPLES / rel).read_text()) if d)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    res = dry_run(stdin=yaml.safe_dump(doc))
    assert res.returncode != 0, res.stdout
    assert path[-1] in res.stderr, res.stderr


def test_kustomize_helm_charts_renders_the_chart(crds):
    version = kubectl("version", "--client", "-o", "yaml")
    kustomize = yaml.safe_load(version.stdout).get("kustomizeVersion", "?")
    res = kubectl("kustomize", "--enable-helm", "--load-restrictor", "LoadRestrictionsNone",
                  "--helm-command", helm_executable(), str(EXAMPLES / "kustomize"))
    # kustomize before v5.8.1 runs `helm version -c`, which Helm 4 removed.
    assert res.returncode == 0, f"kustomize {kustomize}: {res.stderr}"
    objs = [d for d in yaml.safe_load_all(res.stdout) if d]
    names = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert {("Deployment", "mnist-ps-1"), ("Deployment", "mnist-reaper")} <= names
    assert any(kind == "Job" and name.startswith("mnist-worker-") for kind, name in names)  # by generation
    assert ("Pod", "mnist-test") not in names  # skipTests
    assert all(o["metadata"].get("namespace") in (None, "team-a") for o in objs)
    applied = kubectl("apply", "--dry-run=server", "-n", "team-a", "-f", "-", stdin=res.stdout)
    assert applied.returncode == 0, applied.stderr
