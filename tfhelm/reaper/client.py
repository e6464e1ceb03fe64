"""The reaper's side effects: Helm (pyhelm3) and the Kubernetes API behind KubeReapClient,
the error helpers the loop relies on (forbidden, ok-if-missing), and the Events `tfhelm
status` shows. Every action tolerates "already done"."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timezone
from typing import Iterator, Protocol

from tfhelm.cluster.training import JobRow
from tfhelm.errors import Forbidden, ReleaseError, user_facing
from tfhelm.kube import CLUSTER_LABEL, ROLE_LABEL, Gone, Watches
from tfhelm.reaper.rules import EVENT_SOURCE, event_name

__all__ = ["Gone", "KubeReapClient", "ReapClient", "ok_if_missing"]


class ReapClient(Protocol):
    """What the loop needs from the cluster. Every action is idempotent."""

    def list_jobs(self, namespace: str, selector: str) -> tuple[list, str]: ...

    def watch_jobs(self, namespace: str, selector: str, resource_version: str,
                   timeout: int) -> Iterator[tuple[str, object, str]]:
        """Yields (type, V1Job or None for bookmarks, resourceVersion); raises Gone."""

    def list_pods(self, namespace: str, selector: str) -> tuple[list[dict], str]:
        """The metadata (the API's JSON) of the Succeeded pods with these labels."""

    def watch_pods(self, namespace: str, selector: str, resource_version: str,
                   timeout: int) -> Iterator[tuple[str, dict | None, str]]:
        """Pods turning Succeeded, as metadata (JSON); like watch_jobs."""

    def stop_watch(self) -> None:
        """End every watch, now and later."""

    def uninstall(self, release: str, namespace: str) -> bool:
        """False when the release does not exist."""

    def delete_ps(self, namespace: str, cluster: str) -> list[str]:
        """Delete the cluster's PS Deployments and Services; what was deleted."""

    def suspend_job(self, namespace: str, name: str) -> bool: ...

    def emit(self, namespace: str, job: JobRow, reason: str, message: str, warning: bool) -> bool:
        """Create the Event; False when it already existed."""


class KubeReapClient:
    """Helm (pyhelm3) and the Kubernetes API. `helm` is made on first use: a reaper that
    deletes directly needs no helm binary."""

    def __init__(self, kube, helm=None):
        self.kube, self._helm, self.watches = kube, helm, Watches()
        self.instance = os.environ.get("HOSTNAME") or socket.gethostname()

    @property
    def helm(self):
        if self._helm is None:
            from tfhelm.helm import Helm

            self._helm = Helm()
        return self._helm

    def list_jobs(self, namespace, selector):
        res = self.kube.batch.list_namespaced_job(namespace, label_selector=selector,
                                                  _request_timeout=30)
        return res.items, res.metadata.resource_version

    def watch_jobs(self, namespace, selector, resource_version, timeout):
        return self.watches.stream(self.kube.batch.list_namespaced_job, namespace, label_selector=selector,
                                   resource_version=resource_version, timeout=timeout)

    def list_pods(self, namespace, selector):
        return self.kube.succeeded_pods(namespace, selector)

    def watch_pods(self, namespace, selector, resource_version, timeout):
        return self.kube.watch_succeeded_pods(self.watches, namespace, selector, resource_version, timeout)

    def stop_watch(self):
        self.watches.stop()

    def uninstall(self, release, namespace):
        # No --wait: Kubernetes' garbage collector removes the pods; waiting would need
        # watch permissions on every kind in the release.
        return self.helm.uninstall(release, namespace, wait=False)

    def delete_ps(self, namespace, cluster):
        sel = f"{CLUSTER_LABEL}={cluster},{ROLE_LABEL}=ps"
        deleted = []
        for kind, lister, deleter in (
                ("Deployment", self.kube.apps.list_namespaced_deployment,
                 self.kube.apps.delete_namespaced_deployment),
                ("Service", self.kube.core.list_namespaced_service,
                 self.kube.core.delete_namespaced_service)):
            for obj in lister(namespace, label_selector=sel, _request_timeout=30).items:
                if ok_if_missing(deleter, obj.metadata.name, namespace, propagation_policy="Background"):
                    deleted.append(f"{kind} {obj.metadata.name}")
        return deleted

    def suspend_job(self, namespace, name):
        return ok_if_missing(self.kube.batch.patch_namespaced_job, name, namespace,
                             {"spec": {"suspend": True}})

    def emit(self, namespace, job, reason, message, warning):
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        now = datetime.now(timezone.utc)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=event_name(job, reason), namespace=namespace,
                                         labels={CLUSTER_LABEL: job.cluster}),
            involved_object=client.V1ObjectReference(api_version="batch/v1", kind="Job",
                                                     name=job.name, namespace=namespace, uid=job.uid),
            reason=reason, message=message[:1024], type="Warning" if warning else "Normal",
            first_timestamp=now, last_timestamp=now, count=1,
            source=client.V1EventSource(component=EVENT_SOURCE),
            reporting_component="tfhelm.io/reaper", reporting_instance=self.instance[:128])
        try:
            self.kube.core.create_namespaced_event(namespace, body, _request_timeout=30)
            return True
        except ApiException as e:
            if e.status == 409:
                return False
            raise


def ok_if_missing(fn, *args, **kwargs) -> bool:
    """Call a Kubernetes API method; False when its object is already gone (404)."""
    from kubernetes.client.rest import ApiException

    try:
        fn(*args, _request_timeout=30, **kwargs)
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise

