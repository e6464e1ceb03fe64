"""Removing a Helm release without trusting its record.

Helm keeps a release's record (its values, manifest and hooks) in Secrets of the release's
namespace. Whoever may write Secrets there (a workspace's user, a team) can rewrite it: a
hook that `helm uninstall` (or an upgrade, a rollback, `helm test`) runs with the caller's
rights, a manifest whose objects an upgrade deletes (Helm 4.3's uninstall deletes only what
carries the release's own annotations; its upgrade deletes what the last record named and
the new chart does not, wherever it is) and a rollback re-creates. So tfhelm never uninstalls
with Helm: it deletes the release's objects by their labels, in the release's namespace only,
and then the record; nothing of the record is read or run. Before Helm upgrades a release,
`check_records` refuses a record that names anything the chart never makes there.

The kinds come from the chart (each domain says which of its kinds to delete); objects that
Helm would keep (`helm.sh/resource-policy: keep`) are kept, as `helm uninstall` keeps them.
"""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from tfhelm import yamlio
from tfhelm.errors import TfhelmError

if TYPE_CHECKING:
    from tfhelm.kube import Kube

INSTANCE = "app.kubernetes.io/instance"
KEEP = ("helm.sh/resource-policy", "keep")
# Helm's own labels on a release record (its Secret driver); `helm list` selects by them.
RECORD_LABELS = "owner=helm,name={release}"
# Kinds a release may hold that a cluster may not serve (CRDs, alpha APIs) or a tenant may not list.
OPTIONAL = frozenset({"PodMonitor", "PrometheusRule", "StorageClass", "LocalQueue", "ClusterQueue",
                      "PodGroup"})
CLUSTER_SCOPED = frozenset({"StorageClass", "ClusterQueue"})
RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"


@dataclass
class Removed:
    """What removing a release deleted and kept (each "Kind name"), and whether it had a
    record at all."""
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    records: int = 0

    @property
    def found(self) -> bool:
        return bool(self.records or self.deleted or self.kept)


def remove(kube: Kube, namespace: str, release: str, kinds: tuple[str, ...], selector: str = "",
           keep: frozenset[str] = frozenset()) -> Removed:
    """Delete the objects of `kinds` labelled as this release's (and with `selector`, more
    labels), in that order, then its records. Kinds in `keep` and objects Helm keeps stay.
    A cluster-scoped object goes only if Helm recorded it for this namespace."""
    labels = ",".join(filter(None, (f"{INSTANCE}={release}", selector)))
    out = Removed()
    for kind in kinds:
        scoped = kind not in CLUSTER_SCOPED
        for meta in kube.metadata(kind, namespace if scoped else None, labels, optional=kind in OPTIONAL):
            annotations = meta.get("annotations") or {}
            if not scoped and annotations.get(RELEASE_NAMESPACE) != namespace:
                continue
            what = f"{kind} {meta['name']}"
            if kind in keep or annotations.get(KEEP[0]) == KEEP[1]:
                out.kept.append(what)
            elif kube.delete(kind, namespace if scoped else None, meta["name"]):
                out.deleted.append(what)
    for meta in kube.metadata("Secret", namespace, RECORD_LABELS.format(release=release)):
        out.records += kube.delete("Secret", namespace, meta["name"])
    return out


class UntrustedRecord(TfhelmError):
    """A release's record names objects its chart never makes there: rewritten by whoever
    may write Secrets in its namespace. Helm would act on them with the caller's rights."""


def decode_record(data: str) -> dict:
    """A Helm release record as stored in its Secret's `release` key (the API's base64 of
    Helm's base64 of gzipped JSON): the release as JSON."""
    raw = base64.b64decode(base64.b64decode(data))
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def record_objects(release: dict) -> list[dict]:
    """The objects a release record names: its manifest's and its hooks'."""
    docs = yamlio.load_docs(release.get("manifest") or "")
    for hook in release.get("hooks") or []:
        docs += yamlio.load_docs(hook.get("manifest") or "")
    return docs


def foreign_objects(docs: list[dict], namespace: str, kinds: frozenset[str],
                    expected: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
    """The objects (of a release record) that are not of `kinds` in `namespace`, nor
    `expected` (kind, name) pairs (what the caller installs anyway): what a chart of ours
    never holds there, and Helm must not touch for it."""
    found = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        where = meta.get("namespace") or namespace
        if (doc.get("kind"), meta.get("name")) in expected and where == namespace:
            continue
        if doc.get("kind") not in kinds or where != namespace:
            found.append(f"{doc.get('kind')} {where}/{meta.get('name')}")
    return found


def check_records(kube: Kube, namespace: str, release: str, kinds: frozenset[str],
                  expected: frozenset[tuple[str, str]] = frozenset()) -> None:
    """Every stored revision of a release names only `kinds` in its namespace, or what the
    caller installs anyway (`expected`): Helm's upgrade deletes what the last one named, its
    rollback re-creates what an older one did. Else UntrustedRecord, before Helm acts."""
    for meta in kube.metadata("Secret", namespace, RECORD_LABELS.format(release=release)):
        secret = kube.read("Secret", namespace, meta["name"]) or {}
        try:
            record = decode_record((secret.get("data") or {}).get("release", ""))
            foreign = foreign_objects(record_objects(record), namespace, kinds, expected)
        except (ValueError, OSError, TypeError, AttributeError, yaml.YAMLError):
            foreign = ["an unreadable record"]
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise UntrustedRecord(
                f"release {namespace}/{release}: its record {meta['name']} names {shown}, which its "
                "chart never makes there (rewritten by whoever may write Secrets in the namespace?); "
                "Helm would act on it with your rights, so nothing was changed. Remove the cluster "
                f"with `tfhelm down` (by its labels, no hooks), then install it again")
