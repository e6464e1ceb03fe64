"""Releases removed without trusting their records (tfhelm/releases.py), against the real Kube
on an API server in memory: a record whoever writes Secrets in the namespace rewrote (a
pre-delete hook binding a ClusterRole, a manifest naming another namespace's objects) is
never read for a removal, and refused before Helm would upgrade or uninstall from it."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from tfhelm import releases
from tfhelm.cluster import deploy
from tfhelm.errors import ReleaseError
from tfhelm.helm import Helm

from .fake_apiserver import FakeApiServer, served

NS = "team-a"
PLANTED_HOOK = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bob-views-everything}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: user-env-notebook, namespace: tfhelm-user-bob}]
"""
ANOTHER_NAMESPACE = """apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system}
"""
OWN = """apiVersion: apps/v1
kind: Deployment
metadata: {name: mnist-ps-0}
"""


def record(release: str, manifest: str, hooks: tuple[str, ...] = (), version: int = 1) -> tuple[str, dict]:
    """A Helm release record as its Secret driver stores it (gzip, base64, and the API's base64)."""
    body = {"name": release, "namespace": NS, "version": version, "manifest": manifest,
            "hooks": [{"name": f"h{i}", "kind": "?", "manifest": h, "events": ["pre-delete"]} for i, h in enumerate(hooks)]}
    helm_text = base64.b64encode(gzip.compress(json.dumps(body).encode()))
    name = f"sh.helm.release.v1.{release}.v{version}"
    return f"/api/v1/namespaces/{NS}/secrets/{name}", {
        "metadata": {"name": name, "labels": {"owner": "helm", "name": release, "version": str(version)}},
        "type": "helm.sh/release.v1", "data": {"release": base64.b64encode(helm_text).decode()}}


def labelled(path: str, name: str, release: str = "mnist", **meta) -> tuple[str, dict]:
    labels = {"app.kubernetes.io/instance": release, "tfhelm.io/cluster": "mnist"}
    return f"{path}/{name}", {"metadata": {"name": name, "labels": labels, **meta}}


def test_a_clusters_releases_go_by_their_labels_and_the_planted_record_is_never_read():
    server = FakeApiServer()
    apps, core = f"/apis/apps/v1/namespaces/{NS}/deployments", f"/api/v1/namespaces/{NS}"
    keep = {"annotations": {"helm.sh/resource-policy": "keep"}}
    for path, obj in (
            labelled(apps, "mnist-ps-0", "mnist-ps"), labelled(f"{core}/services", "mnist-ps-0", "mnist-ps"),
            labelled(f"/apis/batch/v1/namespaces/{NS}/jobs", "mnist-worker-abc123"),
            labelled(f"{core}/configmaps", "mnist-tfconfig"),
            labelled(f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies", "mnist-fence"),
            labelled(f"{core}/persistentvolumeclaims", "mnist-logs", **keep),
            # The same labels elsewhere: another namespace's, never this release's.
            labelled("/apis/apps/v1/namespaces/other/deployments", "mnist-ps-0", "mnist-ps"),
            labelled("/apis/storage.k8s.io/v1/storageclasses", "fast",
                     annotations={releases.RELEASE_NAMESPACE: "other"}),
            labelled("/apis/storage.k8s.io/v1/storageclasses", "mine", annotations={releases.RELEASE_NAMESPACE: NS}),
            record("mnist-ps", OWN + "---\n" + ANOTHER_NAMESPACE, hooks=(PLANTED_HOOK,)),
            record("mnist", OWN)):
        server.put(path, obj)
    server.put("/apis/apps/v1/namespaces/kube-system/deployments/coredns", {"metadata": {"name": "coredns"}})
    kube = served(server)
    assert deploy.remove_release(kube, NS, "mnist", "mnist-ps").deleted == ["Deployment mnist-ps-0", "Service mnist-ps-0"]
    gone = deploy.remove_release(kube, NS, "mnist", "mnist")
    assert gone.deleted == ["Job mnist-worker-abc123", "ConfigMap mnist-tfconfig", "NetworkPolicy mnist-fence",
                            "StorageClass mine"]
    assert gone.kept == ["PersistentVolumeClaim mnist-logs"] and gone.records == 1
    left = sorted(server.objects)
    assert "/apis/apps/v1/namespaces/kube-system/deployments/coredns" in left
    assert "/apis/apps/v1/namespaces/other/deployments/mnist-ps-0" in left
    assert "/apis/storage.k8s.io/v1/storageclasses/fast" in left
    assert not [p for p in left if "/secrets/" in p]  # both records gone, unread
    # Nothing was written outside the namespace, but the StorageClass Helm made for it.
    writes = [c for c in server.calls if not c.startswith("GET")]
    assert all(f"/namespaces/{NS}/" in c or c.endswith("/storageclasses/mine") for c in writes), writes


@pytest.mark.parametrize("manifest,hooks,named", [
    (OWN + "---\n" + ANOTHER_NAMESPACE, (), "Deployment kube-system/coredns"),
    (OWN, (PLANTED_HOOK,), "ClusterRoleBinding team-a/bob-views-everything"),
])
def test_a_record_naming_what_the_chart_never_makes_there_is_refused_before_an_upgrade(manifest, hooks, named):
    server = FakeApiServer()
    server.put(*record("mnist", OWN, version=1))
    server.put(*record("mnist", manifest, hooks, version=2))
    kinds = frozenset(deploy.RELEASE_KINDS)
    with pytest.raises(releases.UntrustedRecord, match=named) as exc:
        releases.check_records(served(server), NS, "mnist", kinds)
    assert "nothing was changed" in str(exc.value) and exc.value.exit_code == 5


def test_a_record_of_the_charts_own_objects_passes_and_so_does_what_is_installed_anyway():
    server = FakeApiServer()
    server.put(*record("mnist", OWN + "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: fast}\n"))
    kinds = frozenset(deploy.RELEASE_KINDS) - releases.CLUSTER_SCOPED
    with pytest.raises(releases.UntrustedRecord):
        releases.check_records(served(server), NS, "mnist", kinds)
    releases.check_records(served(server), NS, "mnist", kinds, frozenset({("StorageClass", "fast")}))


class RecordingHelm:
    """pyhelm3's Command as Helm runs it: `get manifest` answers a stored manifest."""

    def __init__(self, manifest: str):
        self.manifest, self.ran = manifest, []

    async def run(self, args, stdin=None):
        self.ran.append(args[:2])
        return self.manifest.encode()

    async def uninstall(self, release, **options):
        self.ran.append(["uninstall", release, options])


def test_helm_uninstalls_only_a_record_that_keeps_to_its_namespace_and_never_runs_hooks():
    planted = RecordingHelm(OWN + "---\n" + ANOTHER_NAMESPACE)
    with pytest.raises(ReleaseError, match="Deployment kube-system/coredns"):
        Helm(command=planted).uninstall("mnist-ps", NS)
    assert planted.ran == [["get", "manifest"]]
    clean = RecordingHelm(OWN)
    assert Helm(command=clean).uninstall("mnist-ps", NS, wait=False)
    assert clean.ran[-1] == ["uninstall", "mnist-ps", {"namespace": NS, "wait": False, "no_hooks": True}]


def test_a_record_reads_back_as_helm_wrote_it():
    _, secret = record("mnist", OWN, hooks=(PLANTED_HOOK,))
    release = releases.decode_record(secret["data"]["release"])
    assert [d["kind"] for d in releases.record_objects(release)] == ["Deployment", "ClusterRoleBinding"]
