"""One `tfhelm up` of a cluster at a time: a Lease (coordination.k8s.io) in the cluster's
namespace, held from the first look at the releases to the last install, renewed while held.

Two `up` of one name started together would otherwise both find no cluster, or both compute
their change against the same old state, and the later would silently replace the first
one's Jobs. The second one fails at once (exit 2) naming the holder. A holder that died
(killed, its machine gone) stops renewing: once the Lease is older than its duration the next
`up` takes it over.

Released, the Lease stays without a holder, so every take changes it: an `up` that looked
at the Lease, then read the releases while Helm rendered, takes it as it saw it (create if
there was none, replace at the resourceVersion it saw). If that works, no other `up` held
it in between, and the reads stand (`fenced`); if not, it takes the Lease as usual and reads
again. `tfhelm down` deletes it.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
from datetime import datetime, timedelta, timezone

from tfhelm.contract import CLUSTER_LABEL
from tfhelm.errors import TfhelmError, UsageError
from tfhelm.jsonobject import JsonObject

DURATION = 30  # seconds a Lease holds without renewal: the most any Lease is taken to hold
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


def expires(lease: JsonObject, now: datetime) -> datetime | None:
    """When a Lease frees itself, bounded whatever it says: tfhelm writes DURATION, so a longer
    duration counts as DURATION, and a renewal more than DURATION ahead of this clock (a
    holder's clock far off, or a Lease written by hand) as none. None: it is free now."""
    spec = lease.spec
    renewed = spec.renew_time or spec.acquire_time
    if renewed is None or renewed > now + timedelta(seconds=DURATION):
        return None
    end = renewed + timedelta(seconds=min(spec.lease_duration_seconds or DURATION, DURATION))
    return end if end >= now else None


def expired(lease: JsonObject, now: datetime) -> bool:
    return expires(lease, now) is None


UNSEEN = object()  # InstallLock(seen=...): no look at the Lease before


def peek(kube, namespace: str, cluster: str) -> dict | None:
    """The cluster's Lease as it is now (None: there is none), to take it later as seen."""
    return kube.read_lease(namespace, lease_name(cluster))


class InstallLock:
    """`with InstallLock(kube, namespace, cluster):` holds the cluster's Lease, or raises
    Locked naming who holds it. The namespace must exist. `seen`: the Lease as `peek` saw it
    before reads made without the lock; `fenced` then says whether those reads stand."""

    def __init__(self, kube, namespace: str, cluster: str, seen=UNSEEN, force: bool = False):
        self.kube = kube
        self.namespace, self.cluster = namespace, cluster
        self.name, self.me = lease_name(cluster), holder_identity()
        self.seen, self.fenced = seen, False
        self.force, self.taken_from = force, None  # `--force`: whose Lease it took over
        self._lease: dict | None = None  # the Lease as stored (the API's JSON)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> InstallLock:
        if self.seen is not UNSEEN:
            self._lease = self._take_as_seen(self.seen)
            self.fenced = self._lease is not None
        self._lease = self._lease or self._take()
        self._renewer = threading.Thread(target=self._renew, name="tfhelm-lease", daemon=True)
        self._renewer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._renewer:
            self._renewer.join()  # never a thread alive at exit
        # Released, not deleted (see above); nothing changes if someone took it over meanwhile.
        released = {**self._lease, "spec": {"leaseDurationSeconds": DURATION}}
        self.kube.replace_lease(self.namespace, released)

    def _take_as_seen(self, seen: dict | None) -> dict | None:
        """The Lease, if nobody took it since it was seen; None otherwise."""
        if seen is None:
            return self.kube.create_lease(self.namespace, self._body(_now()))
        held, now = JsonObject(seen), _now()
        self._refuse_if_held(held, now)
        return self.kube.replace_lease(self.namespace, self._body(now, held.metadata.resource_version))

    def _refuse_if_held(self, held: JsonObject, now: datetime) -> None:
        end = expires(held, now)
        if not held.spec.holder_identity or end is None:
            return
        if self.force:
            self.taken_from = held.spec.holder_identity
            return
        since = held.spec.acquire_time
        left = max(1, int((end - now).total_seconds() + 0.999))
        raise Locked(f"--name: another `tfhelm up` of {self.namespace}/{self.cluster} is installing "
                     f"(held by {held.spec.holder_identity}"
                     + (f" since {since:%H:%M:%S} UTC" if since else "") + "); nothing was changed. "
                     f"Run it again once that one is done; if it died, its Lease {self.name} frees "
                     f"itself within {left}s, or `--force` takes it over now (only if no `tfhelm up` "
                     "of this cluster runs)")

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
        if found is None:  # deleted meanwhile (`tfhelm down`)
            return self._take()
        held, now = JsonObject(found), _now()
        self._refuse_if_held(held, now)
        # Free (released, or a dead holder's): replace it, unless someone else just did.
        taken = self.kube.replace_lease(self.namespace, self._body(now, held.metadata.resource_version))
        return taken if taken is not None else self._take()

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_EVERY):
            lease = {**self._lease, "spec": {**self._lease["spec"], "renewTime": _micro_time(_now())}}
            try:
                self._lease = self.kube.replace_lease(self.namespace, lease) or self._lease
            except TfhelmError:
                pass  # tried again in RENEW_EVERY; the install itself reports a lost API server


def remove(kube, namespace: str, cluster: str) -> None:
    """Delete the cluster's Lease unless an `up` holds it (`tfhelm down`)."""
    found = kube.read_lease(namespace, lease_name(cluster))
    if found is not None and not (found.get("spec") or {}).get("holderIdentity"):
        kube.delete_lease(namespace, lease_name(cluster), found["metadata"]["uid"])
