import subprocess

import pytest

from tfhelm.chart import chart_path
from tfhelm.cluster.manifests import render as render_values
from tfhelm.helm import helm_executable


def helm(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([helm_executable(), *args], input=stdin, capture_output=True, text=True)


def render(values: dict | None = None, release: str = "mnist", namespace: str = "team-a",
           chart: str = "tf-cluster") -> list[dict]:
    return render_values(values or {}, release, namespace, chart=chart)


def kinds(manifests: list[dict]) -> list[tuple[str, str]]:
    return sorted((m["kind"], stable_name(m)) for m in manifests)


def stable_name(obj: dict) -> str:
    """An object's name without the generation a Job's name carries (`mnist-worker-1a2b3c`
    is `mnist-worker`), so tests need not know the hash."""
    generation = (obj["metadata"].get("labels") or {}).get("tfhelm.io/generation")
    name = obj["metadata"]["name"]
    return name.removesuffix(f"-{generation}") if generation else name


def pod_specs(manifests: list[dict]) -> dict[str, dict]:
    """Pod specs of the TF tasks' Jobs and Deployments by stable name (see stable_name); the
    in-cluster reaper's Deployment is no task."""
    return {stable_name(m): m["spec"]["template"]["spec"] for m in manifests
            if m["kind"] in ("Job", "Deployment") and m["metadata"]["labels"].get("tfhelm.io/role") != "reaper"}


@pytest.fixture
def tf_chart():
    return str(chart_path("tf-cluster"))
