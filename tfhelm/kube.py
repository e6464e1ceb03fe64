"""The Kubernetes API, through the official client: only what the CLI needs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import cached_property

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from tfhelm.errors import AdmissionRefused, ClusterUnreachable, TfhelmError

CLUSTER_LABEL = "tfhelm.io/cluster"


def load_config(kubeconfig: str | None = None) -> client.ApiClient:
    """The kubeconfig (KUBECONFIG or ~/.kube/config), else the in-cluster ServiceAccount."""
    try:
        # KUBECONFIG read now, not when the kubernetes package was imported.
        return config.new_client_from_config(config_file=kubeconfig or os.environ.get("KUBECONFIG"))
    except (config.ConfigException, FileNotFoundError, TypeError) as err:
        try:
            config.load_incluster_config()
            return client.ApiClient()
        except config.ConfigException:
            raise ClusterUnreachable(f"no kubeconfig: {err}") from err


def current_namespace(kubeconfig: str | None = None) -> str:
    try:
        _, active = config.list_kube_config_contexts(
            config_file=kubeconfig or os.environ.get("KUBECONFIG"))
        return active.get("context", {}).get("namespace") or "default"
    except (config.ConfigException, FileNotFoundError, TypeError):
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                return f.read().strip()
        except OSError:
            return "default"


def _reason(err: ApiException) -> str:
    """The API server's message (a Status object's `message`), else the HTTP reason."""
    import json

    try:
        return json.loads(err.body).get("message") or err.reason
    except (TypeError, ValueError):
        return str(err.reason)


@dataclass
class ClusterObjects:
    pods: list
    jobs: list
    deployments: list
    pvcs: list


class Kube:
    """Connects on first use, so bad input is reported before a missing cluster is."""

    def __init__(self, api: client.ApiClient | None = None, kubeconfig: str | None = None):
        self._api, self._kubeconfig = api, kubeconfig

    @cached_property
    def api(self) -> client.ApiClient:
        return self._api or load_config(self._kubeconfig)

    @cached_property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @cached_property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    @cached_property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    def ping(self) -> str:
        """The server's version, or ClusterUnreachable naming the address tried."""
        try:
            return client.VersionApi(self.api).get_code(_request_timeout=5).git_version
        except (HTTPError, ApiException, OSError) as err:
            raise ClusterUnreachable(f"{self.api.configuration.host}: {type(err).__name__}") from err

    def ensure_namespace(self, namespace: str) -> bool:
        """Create the namespace if missing; True when this call created it."""
        try:
            self.core.read_namespace(namespace)
            return False
        except ApiException as err:
            if err.status != 404:
                raise TfhelmError(f"namespace {namespace}: {err.reason}") from err
            self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
            return True

    def delete_namespace(self, namespace: str) -> None:
        try:
            self.core.delete_namespace(namespace)
        except ApiException as err:
            if err.status != 404:
                raise TfhelmError(f"namespace {namespace}: {err.reason}") from err

    def dry_run_apply(self, namespace: str, objects: list[dict]) -> None:
        """Server-side apply of every object with dryRun=All: admission (quota, Pod Security,
        policies) and validation run as for a real apply, and nothing is stored. Raises
        AdmissionRefused naming the first object the API server refuses."""
        from kubernetes.dynamic import DynamicClient

        dyn = DynamicClient(self.api)
        roles = {o["metadata"]["name"] for o in objects if o.get("kind") == "Role"}
        for obj in objects:
            kind, name = obj.get("kind", "?"), obj.get("metadata", {}).get("name", "?")
            try:
                resource = dyn.resources.get(api_version=obj["apiVersion"], kind=kind)
                dyn.server_side_apply(resource, body=obj, namespace=namespace if resource.namespaced else None,
                                      field_manager="tfhelm-dry-run", force_conflicts=True, dry_run="All")
            except ApiException as err:
                # A dry run stores nothing: a RoleBinding to a Role of the same release cannot
                # be checked (the RBAC escalation check finds no Role) until the Role exists.
                if err.status == 404 and kind == "RoleBinding" and obj.get("roleRef", {}).get("name") in roles:
                    continue
                raise AdmissionRefused(namespace, kind, name, _reason(err)) from err

    def pvc_names(self, namespace: str, cluster: str) -> set[str]:
        """The cluster's PVCs (by label: a PVC someone else makes meanwhile is not ours)."""
        return {p.metadata.name for p in self.core.list_namespaced_persistent_volume_claim(
            namespace, label_selector=f"{CLUSTER_LABEL}={cluster}").items}

    def delete_pvc(self, namespace: str, name: str) -> None:
        try:
            self.core.delete_namespaced_persistent_volume_claim(name, namespace)
        except ApiException as err:
            if err.status != 404:
                raise TfhelmError(f"PersistentVolumeClaim {namespace}/{name}: {err.reason}") from err

    def objects(self, namespace: str, cluster: str) -> ClusterObjects:
        sel = f"{CLUSTER_LABEL}={cluster}"
        return ClusterObjects(
            pods=self.core.list_namespaced_pod(namespace, label_selector=sel).items,
            jobs=self.batch.list_namespaced_job(namespace, label_selector=sel).items,
            deployments=self.apps.list_namespaced_deployment(namespace, label_selector=sel).items,
            pvcs=self.core.list_namespaced_persistent_volume_claim(namespace, label_selector=sel).items,
        )

    def delete_jobs(self, namespace: str, cluster: str, timeout: float = 120) -> list[str]:
        """Delete a cluster's Jobs and wait until their pods are gone (for a new run)."""
        names = [j.metadata.name for j in self.objects(namespace, cluster).jobs]
        for name in names:
            self.batch.delete_namespaced_job(name, namespace, propagation_policy="Foreground")
        deadline = time.monotonic() + timeout
        while names and self.objects(namespace, cluster).jobs:
            if time.monotonic() > deadline:
                raise TfhelmError(f"Jobs of {namespace}/{cluster} still exist after {timeout}s")
            time.sleep(0.5)
        return names

    def delete_pvcs(self, namespace: str, cluster: str) -> list[str]:
        names = [p.metadata.name for p in self.objects(namespace, cluster).pvcs]
        for name in names:
            self.core.delete_namespaced_persistent_volume_claim(name, namespace)
        return names
