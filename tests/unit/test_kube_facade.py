"""The Kube facade's one error idiom (a missing object is None or False; a refusal a typed
error naming the object) and one shape (the API's JSON), and what is built on it: a
cluster's objects (tfhelm/cluster/objects.py), the install lock, `tfhelm logs`, the reaper's
requests."""

import time
from datetime import datetime, timedelta, timezone

import pytest

from tfhelm.cluster import lock, objects, report, tasklogs, training
from tfhelm.contract import CLUSTER_LABEL, ROLE_LABEL, TASK_INDEX_LABEL
from tfhelm.errors import ClusterUnreachable, Forbidden, TfhelmError
from tfhelm.reaper import KubeReapClient, event_name

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


def test_the_clusters_objects_in_the_same_idiom():
    server = FakeApiServer()
    kube = served(server)
    assert kube.ensure_namespace("ns") is True and kube.ensure_namespace("ns") is False
    code = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c-code-1", "labels": {"a": "b"}}}
    assert kube.create_configmap("ns", code) is True and kube.create_configmap("ns", code) is False
    kube.create_configmap("ns", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c-tfconfig"}})
    kube.set_configmap_owner("ns", "c-code-1", "c-tfconfig")
    (owner,) = server.objects["/api/v1/namespaces/ns/configmaps/c-code-1"]["metadata"]["ownerReferences"]
    assert owner["uid"] == server.objects["/api/v1/namespaces/ns/configmaps/c-tfconfig"]["metadata"]["uid"]
    with pytest.raises(TfhelmError, match="ConfigMap ns/gone: the API server refused \\(404\\)"):
        kube.set_configmap_owner("ns", "c-code-1", "gone")
    assert kube.configmap_names("ns", "a=b") == {"c-code-1"}
    assert kube.delete_configmap("ns", "c-code-1") is True and kube.delete_configmap("ns", "c-code-1") is False
    for name, cluster in (("c-logs", "c"), ("c-data", "c"), ("other-logs", "other")):
        server.put(f"/api/v1/namespaces/ns/persistentvolumeclaims/{name}",
                   {"metadata": {"name": name, "labels": {CLUSTER_LABEL: cluster}}})
    assert objects.pvc_names(kube, "ns", "c") == {"c-logs", "c-data"}
    assert sorted(objects.delete_pvcs(kube, "ns", "c")) == ["c-data", "c-logs"]
    assert objects.pvc_names(kube, "ns", "c") == set()
    assert kube.delete_pvc("ns", "c-logs") is False
    assert kube.delete_namespace("ns") is True and kube.delete_namespace("ns") is False


def test_a_list_refused_or_a_server_away_is_one_typed_error():
    server = FakeApiServer()
    server.refuse["GET /apis/batch/v1/namespaces/ns/jobs"] = (
        403, 'jobs.batch is forbidden: User "bob" cannot list resource "jobs" in API group "batch"')
    with pytest.raises(Forbidden, match="jobs in ns: forbidden \\(403\\)"):
        objects.tf_workloads(served(server), "ns")
    with pytest.raises(Forbidden, match="jobs in ns: forbidden"):
        list(objects.of(served(server), "ns", "c").jobs)
    server.down = True
    with pytest.raises(ClusterUnreachable, match="fake-apiserver: MaxRetryError \\(the API server's version\\)"):
        served(server).ping()
    with pytest.raises(ClusterUnreachable, match="\\(pods in ns\\)"):
        next(objects.task_pods(served(server), "ns", "c"))


# --- the reaper's requests ---------------------------------------------------------------

# What the in-cluster reaper's Role allows (charts/tf-cluster/charts/tf-cluster-lib/templates/
# reaper/_rbac.tpl), as requests: list (and watch) Jobs and pods, patch a Job, create Events,
# list and delete Deployments and Services.
REAPER_ROLE = {("GET", "jobs"), ("GET", "pods"), ("PATCH", "jobs"), ("POST", "events"),
               ("GET", "deployments"), ("DELETE", "deployments"), ("GET", "services"), ("DELETE", "services")}


def reaper_cluster(server: FakeApiServer) -> None:
    def labels(role, cluster="c"):
        return {CLUSTER_LABEL: cluster, ROLE_LABEL: role}
    for cluster in ("c", "other"):
        server.put(f"/apis/apps/v1/namespaces/ns/deployments/{cluster}-ps-0",
                   {"metadata": {"name": f"{cluster}-ps-0", "labels": labels("ps", cluster)}})
        server.put(f"/api/v1/namespaces/ns/services/{cluster}-ps-0",
                   {"metadata": {"name": f"{cluster}-ps-0", "labels": labels("ps", cluster)}})
    server.put("/api/v1/namespaces/ns/services/c-worker", {"metadata": {"name": "c-worker", "labels": labels("worker")}})
    server.put("/apis/batch/v1/namespaces/ns/jobs/c-worker", {
        "metadata": {"name": "c-worker", "labels": labels("worker"), "creationTimestamp": "2026-01-01T12:00:00Z",
                     "annotations": {training.RUNS_ANNOTATION: "server"}},
        "spec": {"completions": 2, "template": {"spec": {"containers": [{"name": "tensorflow"}]}}},
        "status": {"succeeded": 1, "ready": 1, "completedIndexes": "0"}})


def test_the_reaper_reads_json_jobs_and_acts_through_kube_within_its_role():
    server = FakeApiServer()
    reaper_cluster(server)
    client = KubeReapClient(served(server))
    jobs, version = client.list_jobs("ns", f"{CLUSTER_LABEL}=c")
    (row,) = [training.job_row(j) for j in jobs]  # the JSON read like a client model
    assert version == "1" and (row.name, row.role, row.cluster, row.total, row.succeeded) == (
        "c-worker", "worker", "c", 2, 1)
    assert row.state == "Running" and row.runs_server and row.completed_indexes == "0" and row.created_at.year == 2026
    assert client.delete_ps("ns", "c") == ["Deployment c-ps-0", "Service c-ps-0"]
    assert client.delete_ps("ns", "c") == [], "already gone"
    assert "/apis/apps/v1/namespaces/ns/deployments/other-ps-0" in server.objects, "another cluster's stay"
    assert "/api/v1/namespaces/ns/services/c-worker" in server.objects
    assert client.suspend_job("ns", "c-worker") is True and client.suspend_job("ns", "gone") is False
    assert server.objects["/apis/batch/v1/namespaces/ns/jobs/c-worker"]["spec"]["suspend"] is True
    assert client.emit("ns", row, "TFClusterReaped", "done: x" * 200, True) is True
    assert client.emit("ns", row, "TFClusterReaped", "again", True) is False, "Event names are deterministic"
    event = server.objects[f"/api/v1/namespaces/ns/events/{event_name(row, 'TFClusterReaped')}"]
    assert event["involvedObject"] == {"apiVersion": "batch/v1", "kind": "Job", "name": "c-worker",
                                       "namespace": "ns", "uid": row.uid}
    assert (event["type"], len(event["message"]), event["metadata"]["labels"]) == ("Warning", 1024, {CLUSTER_LABEL: "c"})
    asked = {(call.split()[0], call.split("/namespaces/ns/")[1].split("/")[0]) for call in server.calls}
    assert asked <= REAPER_ROLE, asked - REAPER_ROLE
    # `tfhelm status` reads the reaper's Events through the same door
    (line,) = report.reaper_lines(objects.events_of(served(server), "ns", "Job", "c-worker"))
    assert "TFClusterReaped: done: x" in line


def test_kube_reads_are_the_apis_json_and_the_cluster_domain_reads_them_like_models():
    """One shape out of the door: plain dicts; the cluster domain wraps the few objects its
    pure code reads like client models (training, report), and keeps pods as JSON."""
    server = FakeApiServer()
    reaper_cluster(server)
    kube = served(server)
    sel = objects.selector("c")
    reads = [kube.read("Job", "ns", "c-worker"), *kube.items("Job", "ns", sel), *kube.each("Service", "ns", sel),
             *kube.deployments("ns", sel), *kube.listing("Job", "ns", sel)[0], *kube.metadata("Job", "ns", sel)]
    assert len(reads) == 7 and all(type(r) is dict for r in reads), reads
    jobs, deployments = objects.workloads(kube, "ns", "c")
    assert [j.metadata.name for j in jobs] == ["c-worker"] and [d.metadata.name for d in deployments] == ["c-ps-0"]
    assert jobs[0].metadata.creation_timestamp.year == 2026 and jobs[0].spec.completions == 2
    assert [j.metadata.name for j in objects.tf_workloads(kube, "ns")[0]] == ["c-worker"]
    assert objects.delete_jobs(kube, "ns", "c") == ["c-worker"] and objects.of(kube, "ns", "c").jobs == []
    assert "/apis/batch/v1/namespaces/ns/jobs/c-worker" not in server.objects


def test_simulated_nodes_are_told_by_where_the_clusters_pods_ran():
    server = FakeApiServer()
    kube = served(server)

    def pod(name: str, node: str) -> None:
        server.put(f"/api/v1/namespaces/ns/pods/{name}",
                   {"metadata": {"name": name, "labels": {CLUSTER_LABEL: "c"}}, "spec": {"nodeName": node}})
    server.put("/api/v1/nodes/kwok-0", {"metadata": {"name": "kwok-0",
                                                     "annotations": {"kwok.x-k8s.io/node": "fake"}}})
    server.put("/api/v1/nodes/real-0", {"metadata": {"name": "real-0"}})
    pod("c-worker-0", "")
    assert objects.ran_only_on_simulated_nodes(kube, "ns", "c") is False, "none was scheduled"
    pod("c-worker-1", "kwok-0")
    assert objects.ran_only_on_simulated_nodes(kube, "ns", "c") is True
    server.refuse["GET /api/v1/nodes"] = (403, 'nodes is forbidden: User "alice" cannot list resource "nodes"')
    assert objects.ran_only_on_simulated_nodes(kube, "ns", "c") is False, "no nodes seen: said real"
    del server.refuse["GET /api/v1/nodes"]
    pod("c-worker-2", "real-0")
    assert objects.ran_only_on_simulated_nodes(kube, "ns", "c") is False


def test_the_reapers_refusals_are_typed_errors_it_can_tell_apart():
    from tfhelm.apierrors import forbidden

    server = FakeApiServer()
    reaper_cluster(server)
    server.refuse["DELETE /apis/apps/v1/namespaces/ns/deployments/c-ps-0"] = (
        403, 'deployments.apps "c-ps-0" is forbidden: User "system:serviceaccount:ns:c-reaper" cannot delete')
    with pytest.raises(Forbidden) as exc:
        KubeReapClient(served(server)).delete_ps("ns", "c")
    assert forbidden(exc.value) and "Deployment ns/c-ps-0: forbidden (403)" in str(exc.value)


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


def planted(server, held_for: int, renewed: datetime) -> None:
    """A Lease written by hand (or by a holder whose clock is far off)."""
    when = lock._micro_time(renewed)
    server.put(LEASE, {"metadata": {"name": lock.lease_name("c")},
                       "spec": {"holderIdentity": "\x1b]0;owned\x07mallory", "leaseDurationSeconds": held_for,
                                "acquireTime": when, "renewTime": when}})


def test_a_lease_holds_for_no_longer_than_tfhelm_writes_whatever_it_says():
    server, now = FakeApiServer(), datetime.now(timezone.utc)
    planted(server, 10**9, now)  # a billion seconds: held as if for DURATION
    with pytest.raises(lock.Locked, match=rf"frees itself within (2[0-9]|30)s, or `--force` takes it over now"):
        with lock.InstallLock(served(server), "ns", "c"):
            pass
    planted(server, 10**9, now - timedelta(seconds=lock.DURATION + 1))
    with lock.InstallLock(served(server), "ns", "c"):  # ... so it is free DURATION after its renewal
        pass
    planted(server, 10**9, now + timedelta(days=365))  # renewed a year from now: no hold at all
    with lock.InstallLock(served(server), "ns", "c") as held:
        assert held.taken_from is None and server.objects[LEASE]["spec"]["holderIdentity"] == lock.holder_identity()


def test_force_takes_over_a_held_lease_and_says_whose():
    server = FakeApiServer()
    planted(server, lock.DURATION, datetime.now(timezone.utc))
    with lock.InstallLock(served(server), "ns", "c", force=True) as held:
        assert held.taken_from == "\x1b]0;owned\x07mallory"
        assert server.objects[LEASE]["spec"]["holderIdentity"] == lock.holder_identity()


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


# --- the Job controller's finalizer ------------------------------------------------------

def test_pods_of_a_deleted_job_are_released_from_its_tracking_finalizer():
    """Kubernetes up to 1.36.3 tries once to take `batch.kubernetes.io/job-tracking` off the
    pods of a deleted Job (kubernetes/kubernetes#141329): tfhelm takes it off those, and
    only those, whose Job is gone."""
    server = FakeApiServer()
    server.put("/apis/batch/v1/namespaces/ns/jobs/c-worker-new", {"metadata": {"name": "c-worker-new", "uid": "new"}})

    def pod(name: str, job: str, uid: str, finalizers: list[str]) -> None:
        server.put(f"/api/v1/namespaces/ns/pods/{name}", {"metadata": {
            "name": name, "labels": {CLUSTER_LABEL: "c"}, "finalizers": finalizers,
            "ownerReferences": [{"kind": "Job", "name": job, "uid": uid, "controller": True}]}})
    tracking = "batch.kubernetes.io/job-tracking"
    pod("of-a-deleted-job", "c-worker-old", "old", ["example.com/keep", tracking])
    pod("of-a-job-of-that-name-again", "c-worker-new", "previous", [tracking])
    pod("of-a-live-job", "c-worker-new", "new", [tracking])
    pod("already-released", "c-worker-old", "old", [])
    assert sorted(served(server).release_tracking_finalizers("ns", f"{CLUSTER_LABEL}=c")) == [
        "of-a-deleted-job", "of-a-job-of-that-name-again"]
    assert server.objects["/api/v1/namespaces/ns/pods/of-a-deleted-job"]["metadata"]["finalizers"] == [
        "example.com/keep"]  # another's finalizer is not tfhelm's to take
    patches = [c for c in server.calls if c.startswith("PATCH")]
    assert patches == ["PATCH /api/v1/namespaces/ns/pods/of-a-deleted-job",
                       "PATCH /api/v1/namespaces/ns/pods/of-a-job-of-that-name-again"]
