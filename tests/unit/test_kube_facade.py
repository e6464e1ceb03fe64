"""The Kube facade's one error idiom (a missing object is None or False; a refusal a typed
error naming the object), and what is built on it: the install lock, `tfhelm logs`."""

import time
from datetime import datetime, timedelta, timezone

import pytest

from tfhelm.cluster import lock, tasklogs
from tfhelm.contract import CLUSTER_LABEL, ROLE_LABEL, TASK_INDEX_LABEL
from tfhelm.errors import ClusterUnreachable, Forbidden, TfhelmError

from .fake_apiserver import FakeApiServer, served

SECRET = "/api/v1/namespaces/ns/secrets/s"


def test_a_missing_object_is_none_or_false():
    kube = served(FakeApiServer())
    assert kube.read_secret("ns", "s") is None and kube.read_namespace("ns") is None
    assert kube.read_lease("ns", "l") is None and kube.read_node("n") is None
    assert kube.delete_secret("ns", "s") is False and kube.label_namespace("ns", {"a": "b"}) is False
    assert kube.pods("ns") == [] and kube.deployments("ns", "a=b") == []


def test_a_create_of_a_name_taken_is_false_and_a_delete_true_once():
    kube = served(FakeApiServer())
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}}
    assert kube.create_secret("ns", secret) is True
    assert kube.create_secret("ns", secret) is False
    assert kube.read_secret("ns", "s")["data"] == {"k": "dg=="}
    assert kube.delete_secret("ns", "s") is True and kube.delete_secret("ns", "s") is False


@pytest.mark.parametrize("status,message,error,shown", [
    (403, 'secrets "s" is forbidden: User "bob" cannot get resource "secrets"', Forbidden,
     "Secret ns/s: forbidden (403)"),
    (401, "Unauthorized", Forbidden, "Secret ns/s: forbidden (401)"),
    (500, "etcdserver: request timed out", TfhelmError, "Secret ns/s: the API server refused (500): etcdserver"),
])
def test_a_refusal_is_a_typed_error_naming_the_object(status, message, error, shown):
    server = FakeApiServer()
    server.refuse[f"GET {SECRET}"] = (status, message)
    with pytest.raises(error) as exc:
        served(server).read_secret("ns", "s")
    assert str(exc.value).startswith(shown)


def test_a_server_that_does_not_answer_is_unreachable():
    server = FakeApiServer()
    server.down = True
    with pytest.raises(ClusterUnreachable, match=r"fake-apiserver: MaxRetryError \(Secret ns/s\)"):
        served(server).read_secret("ns", "s")


# --- the install lock --------------------------------------------------------------------

LEASE = f"/apis/coordination.k8s.io/v1/namespaces/ns/leases/{lock.lease_name('c')}"


def released(server) -> bool:
    return not server.objects[LEASE]["spec"].get("holderIdentity")


def test_one_up_at_a_time_and_the_lease_is_released_with_its_holder():
    server = FakeApiServer()
    kube = served(server)
    with lock.InstallLock(kube, "ns", "c"):
        held = server.objects[LEASE]
        assert held["spec"]["holderIdentity"] == lock.holder_identity()
        assert held["metadata"]["labels"][CLUSTER_LABEL] == "c"
        with pytest.raises(lock.Locked, match=r"another `tfhelm up` of ns/c is installing \(held by .* since"):
            with lock.InstallLock(kube, "ns", "c"):
                pass
        assert server.objects[LEASE] is held, "the second one changed nothing"
        with lock.InstallLock(kube, "ns", "other"):  # another cluster: another Lease
            pass
    assert released(server)
    with lock.InstallLock(kube, "ns", "c"):  # a released Lease is free
        assert not released(server)
    lock.remove(kube, "ns", "c")  # `tfhelm down`
    assert LEASE not in server.objects


def test_a_dead_holders_lease_is_taken_over():
    server = FakeApiServer()
    long_ago = lock._micro_time(datetime.now(timezone.utc) - timedelta(seconds=lock.DURATION + 5))
    server.put(LEASE, {"metadata": {"name": lock.lease_name("c")},
                       "spec": {"holderIdentity": "gone@host pid 1", "leaseDurationSeconds": lock.DURATION,
                                "acquireTime": long_ago, "renewTime": long_ago}})
    with lock.InstallLock(served(server), "ns", "c"):
        assert server.objects[LEASE]["spec"]["holderIdentity"] == lock.holder_identity()
    assert released(server)


def test_reads_made_before_the_lock_stand_only_if_nobody_took_it_since():
    """`up` peeks at the Lease, reads the cluster meanwhile Helm renders, then takes the
    Lease as it saw it: fenced when nobody took it in between, else it must read again."""
    server = FakeApiServer()
    kube = served(server)
    seen = lock.peek(kube, "ns", "c")
    assert seen is None
    with lock.InstallLock(kube, "ns", "c", seen) as held:
        assert held.fenced
    seen = lock.peek(kube, "ns", "c")  # released: it stays, without a holder
    with lock.InstallLock(kube, "ns", "c"):  # another `up` comes and goes in between
        pass
    with lock.InstallLock(kube, "ns", "c", seen) as held:
        assert not held.fenced and not released(server), "held all the same, but the reads must be redone"
    seen = lock.peek(kube, "ns", "c")
    with lock.InstallLock(kube, "ns", "c"):  # held when it is taken as seen: refused, as ever
        with pytest.raises(lock.Locked):
            with lock.InstallLock(kube, "ns", "c", seen):
                pass


def test_the_lease_is_renewed_while_held_and_one_taken_over_is_left_to_its_new_holder(monkeypatch):
    monkeypatch.setattr(lock, "RENEW_EVERY", 0.01)
    server = FakeApiServer()
    with lock.InstallLock(served(server), "ns", "c"):
        version = server.objects[LEASE]["metadata"]["resourceVersion"]
        deadline = time.monotonic() + 10
        while server.objects[LEASE]["metadata"]["resourceVersion"] == version and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.objects[LEASE]["metadata"]["resourceVersion"] != version, "renewed"
        del server.objects[LEASE]
        server.put(LEASE, {"metadata": {"name": lock.lease_name("c")}, "spec": {"holderIdentity": "other"}})
    assert server.objects[LEASE]["spec"]["holderIdentity"] == "other"


# --- tfhelm logs -------------------------------------------------------------------------

def task_pod(index: int) -> tuple[str, dict]:
    name = f"c-worker-{index}"
    return f"/api/v1/namespaces/ns/pods/{name}", {
        "metadata": {"name": name, "labels": {CLUSTER_LABEL: "c", ROLE_LABEL: "worker", TASK_INDEX_LABEL: str(index)}},
        "spec": {"nodeName": "n"},
        "status": {"phase": "Running", "containerStatuses": [{"name": tasklogs.CONTAINER, "state": {"running": {}}}]}}


def test_logs_note_a_log_that_cannot_be_read_and_show_the_others():
    server = FakeApiServer()
    for i in range(3):
        server.put(*task_pod(i))
    server.objects["/api/v1/namespaces/ns/pods/c-worker-0/log"] = "step 1\nstep 2\n"
    server.refuse["GET /api/v1/namespaces/ns/pods/c-worker-1/log"] = (400, 'container "tensorflow" is waiting')
    out, notes = [], []
    assert tasklogs.show(served(server), "ns", "c", out.append, notes.append) == 1
    assert out == ["[worker-0] step 1", "[worker-0] step 2"]
    assert notes == [
        '[worker-1] log of pod ns/c-worker-1: the API server refused (400): container "tensorflow" is waiting',
        "[worker-2] no log: pod c-worker-2 is gone"]
