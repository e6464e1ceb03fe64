"""Rendered manifests: render with real `helm template`, and read back what pods get."""

from __future__ import annotations

import json
import re

from tfhelm import spec

COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def render(values: dict, release: str, namespace: str, chart: str = "tf-cluster") -> list[dict]:
    """`helm template` of a chart (schema, templates and `fail`s are the real ones)."""
    from tfhelm.helm import Helm

    return Helm().template(release, values, namespace, chart=chart)


def expand_env(env: list[dict], field_values: dict[str, str]) -> dict[str, str]:
    """A container's environment as Kubernetes builds it: `$(VAR)` expands only to
    variables defined earlier in the list, `$$` escapes, unknown references stay."""
    out: dict[str, str] = {}
    for item in env:
        if "value" in item:
            raw = str(item["value"])
            out[item["name"]] = _VAR_REF.sub(
                lambda m: "$" if m.group(0) == "$$" else out.get(m.group(1), m.group(0)), raw)
        elif "fieldRef" in item.get("valueFrom", {}):
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            if path in field_values:
                out[item["name"]] = field_values[path]
    return out


def task_tf_configs(manifests: list[dict]) -> dict[tuple[str, int], dict]:
    """Every task's TF_CONFIG, as its pod would see it: from the env when inline,
    else composed from the mounted cluster spec the way the launcher does."""
    configmaps = {m["metadata"]["name"]: m for m in manifests if m.get("kind") == "ConfigMap"}
    result: dict[tuple[str, int], dict] = {}
    for obj in manifests:
        kind = obj.get("kind")
        if kind == "Deployment":
            indexes = [None]
        elif kind == "Job":
            indexes = [str(i) for i in range(int(obj["spec"]["completions"]))]
        else:
            continue
        pod = obj["spec"]["template"]["spec"]
        container = pod["containers"][0]
        for index in indexes:
            fields = {} if index is None else {COMPLETION_INDEX_FIELD: index}
            env = expand_env(container.get("env", []), fields)
            task = (env["TFHELM_TASK_TYPE"], int(env["TFHELM_TASK_INDEX"]))
            if "TF_CONFIG" in env:
                result[task] = json.loads(env["TF_CONFIG"])
            else:
                config = configmaps[_config_volume(pod)]
                cluster = json.loads(config["data"]["cluster.json"])
                result[task] = spec.tf_config(cluster, *task)
    return result


def _config_volume(pod: dict) -> str:
    return next(v["configMap"]["name"] for v in pod["volumes"] if v["name"] == "tfhelm-config")


def by_kind(manifests: list[dict], kind: str) -> list[dict]:
    return [m for m in manifests if m.get("kind") == kind]


def cluster_config(manifests: list[dict]) -> tuple[dict[str, list[str]], str]:
    """The TF_CONFIG `cluster` and the generation (the hash in Job names) a rendered
    release carries in its config ConfigMap: the chart computes them, tfhelm reads them."""
    for cm in by_kind(manifests, "ConfigMap"):
        data = cm.get("data") or {}
        if "cluster.json" in data and "generation" in data:
            return json.loads(data["cluster.json"]), data["generation"]
    raise ValueError("no tf-cluster config ConfigMap in these manifests")


def job_names(manifests: list[dict]) -> dict[str, str]:
    """{role: Job name} of a rendered release."""
    return {j["metadata"]["labels"]["tfhelm.io/role"]: j["metadata"]["name"]
            for j in by_kind(manifests, "Job")}
