"""Local code out of the release: `tfhelm up` ships inline code (`--script ./train.py` and
the .py files beside it) in a ConfigMap of its own, named by its content, and the releases
say `code.source: configMap`. Helm stores a release's values and its manifest in one Secret
per revision, so inline code would sit in it twice, and again in every revision. Pure.

`tfhelm render` and GitOps values keep `code.source: inline`: there the chart makes the
ConfigMap, and the manifests stand alone."""

from __future__ import annotations

import hashlib
import json

from tfhelm import contract
from tfhelm.cluster.values import is_configmap_key
from tfhelm.contract import CLUSTER_LABEL, ROLE_LABEL

ROLE = "code"
# Hex characters of the content hash in the name: a new text, a new ConfigMap (and new Jobs).
HASH_LENGTH = 10


def selector(cluster: str) -> str:
    """The label selector of a cluster's shipped-code ConfigMaps."""
    return f"{CLUSTER_LABEL}={cluster},{ROLE_LABEL}={ROLE}"


def split(cluster: str, values: dict) -> tuple[dict, dict | None]:
    """The values with inline code replaced by a reference, and the ConfigMap holding the
    code (None when the code is not inline)."""
    code = values.get("code") or {}
    data = _files(code)
    if data is None:
        return values, None
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:HASH_LENGTH]
    name = f"{cluster}-{ROLE}-{digest}"
    kept = {k: v for k, v in code.items() if k not in ("inline", "extraFiles")}
    configmap = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {
            CLUSTER_LABEL: cluster, ROLE_LABEL: ROLE,
            "app.kubernetes.io/part-of": "tfhelm", "app.kubernetes.io/managed-by": "tfhelm"}},
        "immutable": True,  # named by its content: it never changes, and kubelets need not watch it
        "data": data,
    }
    return {**values, "code": {**kept, "source": "configMap", "configMap": name}}, configmap


def _files(code: dict) -> dict[str, str] | None:
    """The ConfigMap's data, or None: not inline code, or inline code the chart refuses
    (it then says why, as for `helm install`)."""
    if not isinstance(code, dict) or code.get("source") != "inline":
        return None
    script, text, extra = code.get("script"), code.get("inline"), code.get("extraFiles") or {}
    if not (isinstance(script, str) and isinstance(text, str) and isinstance(extra, dict)):
        return None
    data = {**extra, script.rsplit("/", 1)[-1]: text}
    if not all(isinstance(k, str) and is_configmap_key(k) and isinstance(v, str) for k, v in data.items()):
        return None
    size = sum(len(v.encode()) for v in data.values())
    return data if size <= contract.limit("inlineCodeBytes") else None


def holds(found: dict, code: dict) -> bool:
    """Does a ConfigMap found under the code's name hold exactly that code, immutably?"""
    return not mismatch(found, code)


def mismatch(found: dict, code: dict) -> str:
    """Why a ConfigMap found under the code's name is not that code ("" when it is)."""
    if (found.get("data") or {}) != code["data"] or found.get("binaryData"):
        return "other content"
    if found.get("immutable") is not True:
        return "mutable"
    return ""
