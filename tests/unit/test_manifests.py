from tests.helpers.pods import expand_env

INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def test_references_expand_only_to_earlier_variables():
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-$(C)"}, {"name": "C", "value": "3"}]
    assert expand_env(env, {}) == {"A": "1", "B": "1-$(C)", "C": "3"}


def test_escaped_dollar_and_field_refs():
    env = [{"name": "I", "valueFrom": {"fieldRef": {"fieldPath": INDEX}}},
           {"name": "X", "value": "$$(I) $(I)"}]
    assert expand_env(env, {INDEX: "7"}) == {"I": "7", "X": "$(I) 7"}


def test_each_workload_is_tried_as_one_pod_whose_account_exists():
    """`up` dry-runs one pod per Job and Deployment (admission checks pods only when their
    controller makes them), named as the workload; not one whose ServiceAccount does not
    exist yet (the API server refuses any pod of a missing account)."""
    from tfhelm.cluster import deploy, manifests

    from .fake_apiserver import FakeApiServer, served

    def workload(kind, name, account=None):
        spec = {"containers": [{"name": "c"}], **({"serviceAccountName": account} if account else {})}
        return {"kind": kind, "metadata": {"name": name},
                "spec": {"template": {"metadata": {"labels": {"tfhelm.io/role": "x"}}, "spec": spec}}}
    objects = [workload("Job", "m-worker-abc"), workload("Deployment", "m-ps-0"),
               workload("Deployment", "m-reaper", "m-reaper"), {"kind": "Service", "metadata": {"name": "m-ps-0"}}]
    probes = manifests.pod_probes(objects)
    assert [(p["kind"], p["metadata"]["name"]) for p in probes] == [
        ("Pod", "m-worker-abc"), ("Pod", "m-ps-0"), ("Pod", "m-reaper")]
    assert probes[0]["spec"] == objects[0]["spec"]["template"]["spec"]
    assert probes[0]["metadata"]["labels"] == {"tfhelm.io/role": "x"}
    server = FakeApiServer()
    assert deploy._probes(served(server), "ns", objects) == []  # a new namespace: no account yet
    server.put("/api/v1/namespaces/ns/serviceaccounts/default", {"metadata": {"name": "default"}})
    assert [p["metadata"]["name"] for p in deploy._probes(served(server), "ns", objects)] == ["m-worker-abc", "m-ps-0"]
