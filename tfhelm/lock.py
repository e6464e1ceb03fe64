"""One `tfhelm up` of a cluster at a time: a Lease (coordination.k8s.io) in the cluster's
namespace, held from the first look at the releases to the last install, renewed while held.

Two `up` of one name started together would otherwise both find no cluster, or both compute
their change against the same old state, and the later would silently replace the first
one's Jobs. The second one fails at once (exit 2) naming the holder. A holder that died
(killed, its machine gone) stops renewing: once the Lease is older than its duration the next
`up` takes it over.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
from datetime import datetime, timedelta, timezone

from tfhelm.errors import TfhelmError, UsageError
from tfhelm.kube import CLUSTER_LABEL, JsonObject

DURATION = 30  # seconds a Lease holds without renewal
RENEW_EVERY = 10


class Locked(UsageError):
    """Another `tfhelm up` of the same cluster is installing."""


def lease_name(cluster: str) -> str:
    return f"tfhelm-up-{cluster}"


def holder_identity() -> str:
    """Who holds it, for the other's message: user, host (a pod's name in a pod) and pid."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a uid without a passwd entry (containers)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _micro_time(t: datetime) -> str:
    """A Lease's MicroTime: RFC 3339 in UTC with microseconds, always six digits."""
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def expired(lease: JsonObject, now: datetime) -> bool:
    spec = lease.spec
    renewed = spec.renew_time or spec.acquire_time
    return renewed is None or renewed + timedelta(seconds=spec.lease_duration_seconds or DURATION) < now


class InstallLock:
    """`with InstallLock(kube, namespace, cluster):` holds the cluster's Lease, or raises
    Locked naming who holds it. The namespace must exist."""

    def __init__(self, kube, namespace: str, cluster: str):
        self.kube = kube
        self.namespace, self.cluster = namespace, cluster
        self.name, self.me = lease_name(cluster), holder_identity()
        self._lease: dict | None = None  # the Lease as stored (the API's JSON)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> InstallLock:
        self._lease = self._take()
        self._renewer = threading.Thread(target=self._renew, name="tfhelm-lease", daemon=True)
        self._renewer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._renewer:
            self._renewer.join()  # never a thread alive at exit
        # Only our own: nothing is deleted if someone took it over meanwhile.
        self.kube.delete_lease(self.namespace, self.name, self._lease["metadata"]["uid"])

    def _body(self, now: datetime, resource_version: str | None = None) -> dict:
        labels = {CLUSTER_LABEL: self.cluster, "app.kubernetes.io/managed-by": "tfhelm"}
        metadata = {"name": self.name, "labels": labels}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                "spec": {"holderIdentity": self.me, "leaseDurationSeconds": DURATION,
                         "acquireTime": _micro_time(now), "renewTime": _micro_time(now)}}

    def _take(self) -> dict:
        made = self.kube.create_lease(self.namespace, self._body(_now()))
        if made is not None:
            return made
        found = self.kube.read_lease(self.namespace, self.name)
        if found is None:  # released meanwhile
            return self._take()
        held, now = JsonObject(found), _now()
        if not expired(held, now):
            since = held.spec.acquire_time
            raise Locked(f"--name: another `tfhelm up` of {self.namespace}/{self.cluster} is installing "
                         f"(held by {held.spec.holder_identity}"
                         + (f" since {since:%H:%M:%S} UTC" if since else "") + "); nothing was changed. "
                         f"Run it again once that one is done (a holder that died frees it within "
                         f"{held.spec.lease_duration_seconds or DURATION}s)")
        # A dead holder's: replace it, unless someone else just did (or it is gone).
        taken = self.kube.replace_lease(self.namespace, self._body(now, held.metadata.resource_version))
        return taken if taken is not None else self._take()

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_EVERY):
            lease = {**self._lease, "spec": {**self._lease["spec"], "renewTime": _micro_time(_now())}}
            try:
                self._lease = self.kube.replace_lease(self.namespace, lease) or self._lease
            except TfhelmError:
                pass  # tried again in RENEW_EVERY; the install itself reports a lost API server
