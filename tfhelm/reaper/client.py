"""The side effects of `tfhelm reap` (and `up --reap`): Helm (pyhelm3) and the Kubernetes API
(Kube) behind KubeReapClient, the loop's ReapClient for a console. Every action tolerates
"already done"."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from tfhelm.apierrors import refusal
from tfhelm.cluster import spec
from tfhelm.contract import QUEUE_GATE
from tfhelm.errors import Gone
from tfhelm.jsonobject import JsonObject
from tfhelm.reaper import rules
from tfhelm.watches import Watches

if TYPE_CHECKING:  # passed in
    from tfhelm.kube import Kube

__all__ = ["Gone", "KubeReapClient"]
# Seconds one request of the reaper may take (its lists and watches bound their own).
TIMEOUT = 30


class KubeReapClient:
    """Helm (pyhelm3) and the Kubernetes API through Kube, every request bounded in time (a
    reaper runs for ever: no request may hang it). `helm` is made on first use: a reaper
    that deletes directly needs no helm binary. Within the in-cluster reaper's Role: list
    and watch Jobs (patch to suspend one) and pods' metadata, list and delete Deployments
    and Services, create Events; with a queue, patch and evict pods (the gates) and delete
    the in-graph worker Job by name."""

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

    def uninstall_ps(self, namespace, cluster):
        # No --wait: Kubernetes' garbage collector removes the pods; waiting would need
        # watch permissions on every kind in the release.
        release = spec.ps_release(cluster)
        return release if self.helm.uninstall(release, namespace, wait=False) else None

    def delete_ps(self, namespace, cluster):
        sel = rules.ps_selector(cluster)
        deleted = []
        for kind, lister, deleter in (("Deployment", self.kube.deployments, self.kube.delete_deployment),
                                      ("Service", self.kube.services, self.kube.delete_service)):
            for obj in lister(namespace, sel, timeout=TIMEOUT):
                if deleter(namespace, obj["metadata"]["name"], timeout=TIMEOUT):
                    deleted.append(f"{kind} {obj['metadata']['name']}")
        return deleted

    def suspend_job(self, namespace, name):
        return self.kube.suspend_job(namespace, name, timeout=TIMEOUT)

    def list_gated_pods(self, namespace, selector):
        return self.kube.listing("Pod", namespace, selector)

    def watch_gated_pods(self, namespace, selector, resource_version, timeout):
        return self.kube.watch(self.watches, "Pod", namespace, selector, resource_version, timeout)

    def open_gate(self, namespace, pod):
        return self.kube.remove_scheduling_gate(namespace, pod, QUEUE_GATE, timeout=TIMEOUT)

    def evict(self, namespace, pod):
        return self.kube.evict_pod(namespace, pod, timeout=TIMEOUT)

    def delete_job(self, namespace, name):
        return self.kube.delete_job(namespace, name, timeout=TIMEOUT)

    def emit(self, namespace, job, reason, message, warning):
        event = rules.event(namespace, job, reason, message, warning, self.instance, datetime.now(timezone.utc))
        return self.kube.create_event(namespace, event, timeout=TIMEOUT)

    def refused(self, error):
        return refusal(error)
