"""What the chart does for a failing node (`nodeFailure`, docs/nodes.md): every task's gRPC
keepalive, tolerations, grace period and pod uid (the launcher's fence); the workers'
PodDisruptionBudget where it helps; the reaper that replaces a lost node's tasks, in every
cluster, with nothing more than this namespace's pods."""

from __future__ import annotations

import pytest

from tfhelm.cluster.manifests import by_kind
from tfhelm.errors import RenderError

from .conftest import pod_specs, render

UNREACHABLE, NOT_READY = "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"
SHAPES = {
    "between-graph": {"worker": {"replicas": 3}, "ps": {"replicas": 2}},
    "in-graph": {"mode": "in-graph", "chief": {"enabled": True}, "worker": {"replicas": 3}, "ps": {"replicas": 1}},
    "collective": {"worker": {"replicas": 3}, "ps": {"replicas": 0}},
}


def container(spec: dict) -> dict:
    return spec["containers"][0]


def env(spec: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(spec)["env"]}


def seconds(spec: dict) -> dict:
    return {t["key"]: t.get("tolerationSeconds") for t in spec.get("tolerations", []) if t.get("effect") == "NoExecute"}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_task_gets_keepalive_short_node_tolerations_a_grace_and_its_pod_uid(shape):
    specs = pod_specs(render(SHAPES[shape]))
    assert specs
    for name, spec in specs.items():
        assert env(spec)["TF_GRPC_DEFAULT_OPTIONS"] == "grpc.keepalive_time_ms=10000,grpc.keepalive_timeout_ms=10000"
        assert env(spec)["TFHELM_POD_UID"] == {"fieldRef": {"fieldPath": "metadata.uid"}}, name
        assert seconds(spec) == {UNREACHABLE: 10, NOT_READY: 60}, name
        assert spec["terminationGracePeriodSeconds"] == 30, name


def test_a_roles_own_settings_win_and_each_default_can_be_turned_off():
    mine = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}]
    specs = pod_specs(render({
        "worker": {"replicas": 2, "tolerations": mine, "env": [{"name": "TF_GRPC_DEFAULT_OPTIONS", "value": "x=1"}]},
        "nodeFailure": {"notReadySeconds": None, "terminationGraceSeconds": 120}}))
    worker = specs["mnist-worker"]
    assert seconds(worker) == {UNREACHABLE: 600}, "the role's toleration, and null leaves not-ready to Kubernetes"
    assert [e["value"] for e in container(worker)["env"] if e["name"] == "TF_GRPC_DEFAULT_OPTIONS"] == ["x=1"]
    assert worker["terminationGracePeriodSeconds"] == 120
    ps = specs["mnist-ps-0"]
    assert seconds(ps) == {UNREACHABLE: 10}
    everything = [{"operator": "Exists"}]  # tolerates every taint: nothing to add
    assert seconds(pod_specs(render({"tolerations": everything}))["mnist-ps-0"]) == {}
    off = pod_specs(render({"nodeFailure": {"grpcOptions": ""}}))["mnist-ps-0"]
    assert "TF_GRPC_DEFAULT_OPTIONS" not in env(off)


@pytest.mark.parametrize("options", ["grpc.keepalive_time_ms", "a=1,", "a=1,,b=2", "a=1 b=2", "=1"])
def test_grpc_options_tensorflow_could_not_parse_are_refused(options):
    with pytest.raises(RenderError, match="name=value"):
        render({"nodeFailure": {"grpcOptions": options}})


def budgets(manifests) -> list[dict]:
    return by_kind(manifests, "PodDisruptionBudget")


@pytest.mark.parametrize("shape", ["between-graph", "in-graph"])
def test_workers_of_a_ps_training_leave_a_drained_node_one_at_a_time(shape):
    (pdb,) = budgets(render(SHAPES[shape]))
    assert pdb["spec"]["minAvailable"] == 2 and pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "tf-cluster", "app.kubernetes.io/instance": "mnist",
        "app.kubernetes.io/component": "worker"}


@pytest.mark.parametrize("values", [SHAPES["collective"], {"worker": {"replicas": 1}},
                                    {**SHAPES["between-graph"], "nodeFailure": {"disruptionBudget": False}},
                                    {**SHAPES["between-graph"], "components": "ps"}])
def test_no_budget_where_it_would_not_help(values):
    """A collective training stops whole at any lost worker; one worker has nobody to train
    meanwhile; the PS release holds no workers."""
    assert budgets(render(values)) == []


def reaper(manifests) -> tuple[list[str], list[tuple]]:
    (dep,) = [d for d in by_kind(manifests, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    (role,) = by_kind(manifests, "Role")
    rules = [(tuple(r["resources"]), tuple(r.get("resourceNames", ())), tuple(r["verbs"])) for r in role["rules"]]
    return container(dep["spec"]["template"]["spec"])["args"], rules


@pytest.mark.parametrize("shape", SHAPES)
def test_the_reaper_replaces_lost_tasks_in_every_cluster_with_this_namespaces_pods_only(shape):
    manifests = render(SHAPES[shape])
    args, rules = reaper(manifests)
    assert "--replace-lost-tasks" in args
    assert ("--no-reap" in args) == (shape == "collective")
    assert (("pods",), (), ("patch", "delete")) in rules
    assert not by_kind(manifests, "ClusterRole") and not by_kind(manifests, "ClusterRoleBinding")
    (dep,) = [d for d in by_kind(manifests, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    assert seconds(dep["spec"]["template"]["spec"]) == {UNREACHABLE: 10, NOT_READY: 60}, "moves as soon"


def test_without_lost_task_replacement_the_reaper_may_not_touch_pods():
    args, rules = reaper(render({"nodeFailure": {"replaceLostTasks": False}}))
    assert "--replace-lost-tasks" not in args
    assert not [r for r in rules if r[0] == ("pods",) and set(r[2]) - {"list", "watch"}]
    assert not [d for d in render({**SHAPES["collective"], "nodeFailure": {"replaceLostTasks": False}})
                if d["metadata"]["name"] == "mnist-reaper"]
