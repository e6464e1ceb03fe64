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

from kubernetes import client
from kubernetes.client.rest import ApiException

from tfhelm.errors import UsageError, api_error
from tfhelm.kube import CLUSTER_LABEL

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


def expired(lease: client.V1Lease, now: datetime) -> bool:
    spec = lease.spec
    renewed = spec.renew_time or spec.acquire_time
    return renewed is None or renewed + timedelta(seconds=spec.lease_duration_seconds or DURATION) < now


class InstallLock:
    """`with InstallLock(kube, namespace, cluster):` holds the cluster's Lease, or raises
    Locked naming who holds it. The namespace must exist."""

    def __init__(self, kube, namespace: str, cluster: str):
        self.api = client.CoordinationV1Api(kube.api)
        self.namespace, self.cluster = namespace, cluster
        self.name, self.me = lease_name(cluster), holder_identity()
        self._lease: client.V1Lease | None = None
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
        try:  # only our own: the precondition fails if someone took it over meanwhile
            self.api.delete_namespaced_lease(self.name, self.namespace, body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid=self._lease.metadata.uid)))
        except ApiException as err:
            if err.status not in (404, 409):
                raise api_error(err, f"lease {self.namespace}/{self.name}") from err

    def _body(self, now: datetime, resource_version: str | None = None) -> client.V1Lease:
        return client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, resource_version=resource_version, labels={
                CLUSTER_LABEL: self.cluster, "app.kubernetes.io/managed-by": "tfhelm"}),
            spec=client.V1LeaseSpec(holder_identity=self.me, lease_duration_seconds=DURATION,
                                    acquire_time=now, renew_time=now))

    def _take(self) -> client.V1Lease:
        what = f"lease {self.namespace}/{self.name}"
        try:
            return self.api.create_namespaced_lease(self.namespace, self._body(_now()))
        except ApiException as err:
            if err.status != 409:
                raise api_error(err, what) from err
        try:
            held = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as err:
            if err.status == 404:  # released meanwhile
                return self._take()
            raise api_error(err, what) from err
        now = _now()
        if not expired(held, now):
            since = held.spec.acquire_time
            raise Locked(f"--name: another `tfhelm up` of {self.namespace}/{self.cluster} is installing "
                         f"(held by {held.spec.holder_identity}"
                         + (f" since {since:%H:%M:%S} UTC" if since else "") + "); nothing was changed. "
                         f"Run it again once that one is done (a holder that died frees it within "
                         f"{held.spec.lease_duration_seconds or DURATION}s)")
        try:  # a dead holder's: replace it, unless someone else just did
            return self.api.replace_namespaced_lease(self.name, self.namespace,
                                                     self._body(now, held.metadata.resource_version))
        except ApiException as err:
            if err.status == 409:
                return self._take()
            raise api_error(err, what) from err

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_EVERY):
            try:
                self._lease.spec.renew_time = _now()
                self._lease = self.api.replace_namespaced_lease(self.name, self.namespace, self._lease)
            except (ApiException, OSError):
                pass  # tried again in RENEW_EVERY; the install itself reports a lost API server
