"""examples/gitops/: the values each example carries are what `tfhelm render --values-only`
prints for the documented command, and they render through the chart. (Their objects are
validated against the real Argo CD and Flux CRDs in tests/cluster/test_gitops.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tfhelm.cluster import gitops
from tfhelm.cluster.deploy import plan
from tfhelm.cluster.manifests import job_names
from tfhelm.cluster.values import ClusterOptions

from .conftest import render

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gitops"
# The command the examples' comments name.
OPTS = ClusterOptions(name="mnist", namespace="team-a", workers=8, ps=2,
                      script="http://files.team-a.svc/train.py")


def docs(rel: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((EXAMPLES / rel).read_text()) if d]


def expected(one: bool) -> dict[str, dict]:
    return {r.name: r.values for r in gitops.releases(plan(OPTS), one=one)}


@pytest.mark.parametrize("rel", ["argocd/applications-git.yaml", "argocd/applications-oci.yaml"])
def test_argocd_values_are_the_clis(rel):
    apps = docs(rel)
    got = {a["spec"]["source"]["helm"]["releaseName"]: a["spec"]["source"]["helm"]["valuesObject"] for a in apps}
    assert got == expected(one=False)
    assert {a["spec"]["destination"]["namespace"] for a in apps} == {"team-a"}
    ps_app = next(a for a in apps if a["metadata"]["name"] == "mnist-ps")
    assert ps_app["spec"]["syncPolicy"]["automated"]["selfHeal"] is False  # a reaped PS stays reaped


@pytest.mark.parametrize("rel", ["flux/git/helmrelease.yaml", "flux/oci/helmrelease.yaml"])
def test_flux_values_are_the_clis_one_release(rel):
    (hr,) = docs(rel)
    assert {hr["metadata"]["name"]: hr["spec"]["values"]} == expected(one=True)
    assert hr["spec"]["driftDetection"]["mode"] == "warn"  # Flux does not bring reaped PS back


def test_kustomize_values_are_the_clis_one_release():
    (chart,) = docs("kustomize/kustomization.yaml")[0]["helmCharts"]
    assert {chart["releaseName"]: chart["valuesInline"]} == expected(one=True)
    assert (EXAMPLES / "kustomize" / docs("kustomize/kustomization.yaml")[0]["helmGlobals"]["chartHome"]
            / "tf-cluster" / "Chart.yaml").is_file()


@pytest.mark.parametrize("one", [False, True])
def test_example_values_render_with_the_reaper(one):
    for name, values in expected(one).items():
        m = render(values, release=name, namespace="team-a")
        kinds = {(o["kind"], o["metadata"]["name"]) for o in m}
        if values["components"] == "ps":
            assert ("Deployment", "mnist-ps-1") in kinds and ("Deployment", "mnist-reaper") not in kinds
        else:
            assert ("Deployment", "mnist-reaper") in kinds and job_names(m)["worker"].startswith("mnist-worker-")
