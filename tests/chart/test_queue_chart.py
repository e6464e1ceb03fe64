"""A Kueue-queued cluster in the charts (tf-cluster `queue`, user-env `queue`; docs/queue.md):
what a queue adds to the render, and that without one the render is what it always was."""

from __future__ import annotations

import json
import re

import pytest

from tfhelm.cluster.manifests import by_kind, job_names
from tfhelm.contract import PRIORITY_LABEL, QUEUE_GATE, QUEUE_LABEL
from tfhelm.errors import RenderError
from tfhelm.workspace import userspec

from .conftest import pod_specs, render, stable_name

QUEUED = {"queue": {"name": "team", "priorityClass": "high"}}
SHAPES = [
    {},
    {"ps": {"replicas": 2}, "worker": {"replicas": 3}, "chief": {"enabled": True}, "evaluator": {"enabled": True}},
    {"mode": "in-graph", "chief": {"enabled": True}, "ps": {"replicas": 1}, "reaper": {"enabled": True}},
    {"ps": {"replicas": 0}, "worker": {"replicas": 4}},
    {"reaper": {"enabled": True}, "monitoring": {"prometheusRule": {"enabled": True}}},
]


def gates(spec: dict) -> list[str]:
    return [g["name"] for g in spec.get("schedulingGates") or []]


@pytest.mark.parametrize("values", SHAPES)
def test_without_a_queue_nothing_of_it_renders(values):
    """queue.name empty (the default, or given empty) renders no Kueue label, no gate, no
    new controller right, and the same bytes as leaving `queue` out."""
    plain = render(values)
    labels = [k for m in plain for k in (m["metadata"].get("labels") or {})]
    assert not [k for k in labels if k.startswith("kueue.x-k8s.io/")]
    assert not [n for n, spec in pod_specs(plain).items() if "schedulingGates" in spec]
    assert "--gates" not in json.dumps(by_kind(plain, "Deployment"))
    assert render({**values, "queue": {"name": "", "priorityClass": ""}}) == plain


@pytest.mark.parametrize("values", SHAPES)
def test_a_queue_adds_only_its_labels_gates_and_controller(values):
    """With a queue: the worker Job carries Kueue's labels (and no `suspend`), the other roles'
    pods the gate, and the controller (the reaper's Deployment) runs with --gates whenever a
    pod is gated (as it runs for the lost-tasks rule, on by default). Take those (and the queue's alert) away and every other object is the
    unqueued cluster's, but for the Job names (the generation says "queued": the gated pods
    differ)."""
    plain, queued = render(values), render({**values, **QUEUED})
    workers = next(m for m in by_kind(queued, "Job") if m["metadata"]["name"] == job_names(queued)["worker"])
    assert workers["metadata"]["labels"][QUEUE_LABEL] == "team"
    assert workers["metadata"]["labels"][PRIORITY_LABEL] == "high"
    assert "suspend" not in workers["spec"], "Kueue sets suspend; the chart never does"
    specs = pod_specs(queued)
    gated = {name for name, spec in specs.items() if gates(spec)}
    assert gated == {n for n in specs if n.split("-")[1] in ("ps", "chief", "evaluator")}
    assert all(gates(specs[n]) == [QUEUE_GATE] for n in gated)
    controller = [m for m in by_kind(queued, "Deployment") if m["metadata"]["name"] == "mnist-reaper"]
    lost = values.get("reaper", {}).get("enabled", True)  # nodeFailure.replaceLostTasks is on by default
    assert bool(controller) == bool(gated or lost), "the controller runs when a pod waits for its gate"
    if gated:
        args = controller[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        reaps = (values.get("reaper", {}).get("enabled", True) and values.get("ps", {}).get("replicas", 1)
                 and (values.get("mode") != "in-graph" or values.get("chief", {}).get("enabled")))
        assert "--gates" in args and ("--no-reap" in args) == (not reaps)
    ours = lambda m: m["metadata"]["name"].startswith("mnist-reaper")  # noqa: E731
    assert {stable_name(m): _unqueue(m) for m in queued if not ours(m)} == \
        {stable_name(m): _unqueue(m) for m in plain if not ours(m)}


def _unqueue(obj: dict) -> dict:
    """An object without what a queue adds: Kueue's labels, the gate, the queue's alert, and
    the generation in names, labels and the cluster spec's hash."""
    text = json.dumps(obj)
    for name in job_names_in(obj):
        text = text.replace(name, name.rsplit("-", 1)[0])
    obj = json.loads(text)
    labels = obj["metadata"].get("labels") or {}
    for key in (QUEUE_LABEL, PRIORITY_LABEL, "tfhelm.io/generation"):
        labels.pop(key, None)
    if obj["kind"] == "ConfigMap":
        (obj.get("data") or {}).pop("generation", None)
    for group in (obj.get("spec") or {}).get("groups") or []:  # the PrometheusRule's queue alert
        group["rules"] = [r for r in group["rules"] if r.get("alert") != "TFTrainingQueuedTooLong"]
    template = (obj.get("spec") or {}).get("template") or {}
    (template.get("spec") or {}).pop("schedulingGates", None)
    ((template.get("metadata") or {}).get("annotations") or {}).pop("checksum/cluster-spec", None)
    return obj


def job_names_in(obj: dict) -> list[str]:
    return sorted(set(re.findall(r"mnist-(?:worker|chief|evaluator)-[0-9a-f]{6}", json.dumps(obj))), key=len, reverse=True)


def test_the_controllers_rights_with_a_queue():
    m = render({"ps": {"replicas": 1}, "chief": {"enabled": True}, "reaper": {"enabled": False}, **QUEUED})
    (role,) = by_kind(m, "Role")
    rules_ = [(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r.get("resourceNames", ())), tuple(r["verbs"]))
              for r in role["rules"]]
    assert rules_ == [
        (("batch",), ("jobs",), (), ("list", "watch")),
        (("",), ("pods",), (), ("list", "watch")),
        (("",), ("pods",), (), ("patch",)),
        (("",), ("pods/eviction",), (), ("create",)),
        (("",), ("events",), (), ("create",)),
    ], "gates only (reaper.enabled is false): no delete of anything"


def test_in_graph_queued_workers_are_deleted_by_name():
    m = render({"mode": "in-graph", "chief": {"enabled": True}, "reaper": {"enabled": True}, **QUEUED})
    (role,) = by_kind(m, "Role")
    worker = job_names(m)["worker"]
    assert {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": [worker], "verbs": ["delete"]} in role["rules"]
    assert not any("patch" in r["verbs"] and r["resources"] == ["jobs"] for r in role["rules"])


def test_the_queue_alert():
    rule = by_kind(render({"monitoring": {"prometheusRule": {"enabled": True, "queuedMinutes": 30}}, **QUEUED}),
                   "PrometheusRule")[0]
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert "time() - max by (namespace, cluster) (tfhelm_queue_waiting_since_seconds{namespace=\"team-a\", cluster=\"mnist\"}) > 1800" \
        == alerts["TFTrainingQueuedTooLong"]["expr"]
    plain = by_kind(render({"monitoring": {"prometheusRule": {"enabled": True}}}), "PrometheusRule")[0]
    assert "TFTrainingQueuedTooLong" not in json.dumps(plain)


@pytest.mark.parametrize("bad, message", [
    ({"queue": {"name": "Team Q"}}, "queue.name"),
    ({"queue": {"name": "team", "extra": 1}}, "extra"),
    ({"queue": {"priorityClass": "x" * 64}}, "queue.priorityClass"),
])
def test_the_schema_refuses_bad_queue_values(bad, message):
    with pytest.raises(RenderError, match=message):
        render(bad)


def test_notes_say_where_it_waits():
    from .conftest import helm
    from tfhelm.chart import chart_path

    out = helm("install", "mnist", str(chart_path()), "--dry-run=client", "-n", "team-a", "--set", "queue.name=team")
    assert out.returncode == 0, out.stderr
    assert "Queued in Kueue LocalQueue team" in out.stdout


# ----------------------------------------------------------------------------- user-env

def user_env(values: dict) -> list[dict]:
    return render({"userName": "alice", **values}, release="user-env", namespace="tfhelm-user-alice", chart="user-env")


def test_a_workspace_queue():
    m = user_env({"queue": {"enabled": True, "nominalQuota": {"cpu": "2", "memory": "4Gi"},
                            "borrowingLimit": {"cpu": "1"}, "priorityClasses": ["low", "normal"]}})
    (cq,) = by_kind(m, "ClusterQueue")
    assert cq["metadata"]["name"] == "tfhelm-user-alice" and cq["spec"]["cohortName"] == "tfhelm"
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "tfhelm-user-alice"}}
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory"]
    assert group["flavors"] == [{"name": "default-flavor", "resources": [
        {"name": "cpu", "nominalQuota": "2", "borrowingLimit": "1"}, {"name": "memory", "nominalQuota": "4Gi"}]}]
    (lq,) = by_kind(m, "LocalQueue")
    assert lq["metadata"]["name"] == "training" and lq["spec"] == {"clusterQueue": "tfhelm-user-alice"}
    assert lq["metadata"]["labels"]["tfhelm.io/user"] == "alice"
    role = next(r for r in by_kind(m, "Role") if r["metadata"]["name"] == "user-env-queue")
    assert {"apiGroups": ["tfhelm.io"], "resources": ["workloadpriorityclasses"],
            "resourceNames": ["low", "normal"], "verbs": ["use"]} in role["rules"]
    binding = next(b for b in by_kind(m, "RoleBinding") if b["metadata"]["name"] == "user-env-queue")
    assert binding["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                    "name": "system:serviceaccounts:tfhelm-user-alice"}]


def test_no_workspace_queue_by_default_and_no_default_local_queue():
    assert not by_kind(user_env({}), "ClusterQueue") and not by_kind(user_env({}), "LocalQueue")
    with pytest.raises(RenderError, match="queue.name"):
        user_env({"queue": {"enabled": True, "name": "default"}})


def test_the_priority_policy_checks_the_label_only_where_it_is_set_or_changed():
    policy, binding = userspec.priority_policy()
    assert policy["kind"] == "ValidatingAdmissionPolicy" and binding["spec"]["policyName"] == policy["metadata"]["name"]
    condition = policy["spec"]["matchConditions"][0]["expression"]
    assert "!has(object.metadata.ownerReferences)" in condition and "oldObject" in condition
    assert "check('use')" in policy["spec"]["validations"][0]["expression"]
