"""The reaper's side effects: Helm (pyhelm3) and the Kubernetes API (Kube) behind
KubeReapClient, and the Events `tfhelm status` shows. Every action tolerates "already
done"."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timezone
from typing import Iterator, Protocol

from tfhelm.cluster.training import JobRow
from tfhelm.kube import CLUSTER_LABEL, ROLE_LABEL, Gone, JsonObject, Kube, Watches
from tfhelm.reaper.rules import EVENT_SOURCE, event_name

__all__ = ["Gone", "KubeReapClient", "ReapClient"]
# Seconds one request of the reaper may take (its lists and watches bound their own).
TIMEOUT = 30


class ReapClient(Protocol):
    """What the loop needs from the cluster. Every action is idempotent."""

    def list_jobs(self, namespace: str, selector: str) -> tuple[list, str]:
        """The Jobs with these labels (read like client models: training.job_row reads them)
        and the list's resourceVersion."""

    def watch_jobs(self, namespace: str, selector: str, resource_version: str,
                   timeout: int) -> Iterator[tuple[str, object, str]]:
        """Yields (type, a Job as list_jobs gives them or None for bookmarks,
        resourceVersion); raises Gone."""

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
    """Helm (pyhelm3) and the Kubernetes API through Kube, every request bounded in time (a
    reaper runs for ever: no request may hang it). `helm` is made on first use: a reaper
    that deletes directly needs no helm binary. Within the in-cluster reaper's Role: list
    and watch Jobs (patch to suspend one) and pods' metadata, list and delete Deployments
    and Services, create Events."""

    def __init__(self, kube: Kube, helm=None):
        self.kube, self._helm, self.watches = kube, helm, Watches()
        self.instance = os.environ.get("HOSTNAME") or socket.gethostname()

    @property
    def helm(self):
        if self._helm is None:
            from tfhelm.helm import Helm

            self._helm = Helm()
        return self._helm

    def list_jobs(self, namespace, selector):
        jobs, version = self.kube.listing("Job", namespace, selector)
        return [JsonObject(j) for j in jobs], version

    def watch_jobs(self, namespace, selector, resource_version, timeout):
        for kind, job, version in self.kube.watch(self.watches, "Job", namespace, selector, resource_version,
                                                  timeout):
            yield kind, None if job is None else JsonObject(job), version

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
        for kind, lister, deleter in (("Deployment", self.kube.deployments, self.kube.delete_deployment),
                                      ("Service", self.kube.services, self.kube.delete_service)):
            for obj in lister(namespace, sel, timeout=TIMEOUT):
                if deleter(namespace, obj["metadata"]["name"], timeout=TIMEOUT):
                    deleted.append(f"{kind} {obj['metadata']['name']}")
        return deleted

    def suspend_job(self, namespace, name):
        return self.kube.suspend_job(namespace, name, timeout=TIMEOUT)

    def emit(self, namespace, job, reason, message, warning):
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": event_name(job, reason), "namespace": namespace,
                         "labels": {CLUSTER_LABEL: job.cluster}},
            "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "name": job.name,
                               "namespace": namespace, "uid": job.uid},
            "reason": reason, "message": message[:1024], "type": "Warning" if warning else "Normal",
            "firstTimestamp": now, "lastTimestamp": now, "count": 1, "source": {"component": EVENT_SOURCE},
            "reportingComponent": "tfhelm.io/reaper", "reportingInstance": self.instance[:128]}
        return self.kube.create_event(namespace, event, timeout=TIMEOUT)
