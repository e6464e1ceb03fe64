"""Rendered manifests: render with real `helm template`, and read back what the chart computed."""

from __future__ import annotations

import json

from tfhelm import contract
from tfhelm.pod import tfconfig


def render(values: dict, release: str, namespace: str, chart: str = "tf-cluster") -> list[dict]:
    """`helm template` of a chart (schema, templates and `fail`s are the real ones)."""
    from tfhelm.helm import Helm

    return Helm().template(release, values, namespace, chart=chart)


def by_kind(manifests: list[dict], kind: str) -> list[dict]:
    return [m for m in manifests if m.get("kind") == kind]


def config_map(manifests: list[dict]) -> dict:
    """A rendered release's config ConfigMap (the cluster spec, the generation)."""
    for cm in by_kind(manifests, "ConfigMap"):
        data = cm.get("data") or {}
        if "cluster-spec.json" in data and "generation" in data:
            return cm
    raise ValueError("no tf-cluster config ConfigMap in these manifests")


def cluster_config(manifests: list[dict]) -> tuple[dict[str, list[str]], str]:
    """The TF_CONFIG `cluster` (the cluster spec expanded by the launcher's own code) and
    the generation (the hash in Job names) a rendered release carries in its config
    ConfigMap: the chart computes them, tfhelm reads them."""
    data = config_map(manifests)["data"]
    return tfconfig.expand_cluster(json.loads(data["cluster-spec.json"])), data["generation"]


def job_names(manifests: list[dict]) -> dict[str, str]:
    """{role: Job name} of a rendered release."""
    return {j["metadata"]["labels"][contract.ROLE_LABEL]: j["metadata"]["name"]
            for j in by_kind(manifests, "Job")}


def pod_probes(manifests: list[dict]) -> list[dict]:
    """A Pod for each Job's and Deployment's template, named as its workload: what a server-side
    dry run must admit too, since the API server checks a workload's pods (quota, GPUs,
    LimitRange, Pod Security's enforcement, policies) only when its controller makes them."""
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": o["metadata"]["name"], "labels": o["spec"]["template"]["metadata"].get("labels") or {}},
             "spec": o["spec"]["template"]["spec"]}
            for o in manifests if o.get("kind") in ("Job", "Deployment")]
