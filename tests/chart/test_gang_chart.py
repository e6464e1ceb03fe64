"""Kubernetes' own gang scheduling in the chart (tf-cluster `gang.enabled`; alpha in Kubernetes
1.36, docs/gang.md): one PodGroup (scheduling.k8s.io/v1alpha2) for the whole TF cluster, named
by every task pod; without it the render is what it always was."""

from __future__ import annotations

import json

import pytest

from tfhelm import helm as helm_module
from tfhelm import releases
from tfhelm.cluster import deploy
from tfhelm.cluster.manifests import by_kind
from tfhelm.errors import RenderError
from tfhelm.workspace import userspec

from .conftest import pod_specs, render, stable_name

GANG = {"gang": {"enabled": True}}
SHAPES = [
    {},
    {"ps": {"replicas": 2}, "worker": {"replicas": 3}, "chief": {"enabled": True}, "evaluator": {"enabled": True}},
    {"mode": "in-graph", "chief": {"enabled": True}, "ps": {"replicas": 1}, "reaper": {"enabled": True}},
    {"ps": {"replicas": 0}, "worker": {"replicas": 4}},
]


def task_count(manifests: list[dict]) -> int:
    """The task pods a render makes: each Job's parallelism, each PS Deployment's replicas."""
    tasks = [m for m in manifests if m["kind"] in ("Job", "Deployment")
             and m["metadata"]["labels"].get("tfhelm.io/role") != "reaper"]
    return sum(m["spec"].get("parallelism", m["spec"].get("replicas", 0)) for m in tasks)


def group_of(spec: dict) -> str | None:
    return (spec.get("schedulingGroup") or {}).get("podGroupName")


@pytest.mark.parametrize("values", SHAPES)
def test_without_gang_nothing_of_it_renders(values):
    """gang.enabled false (the default, or given) renders no PodGroup, no pod names one, and
    the same bytes as leaving `gang` out."""
    plain = render(values)
    assert not by_kind(plain, "PodGroup")
    assert "schedulingGroup" not in json.dumps(plain)
    assert render({**values, "gang": {"enabled": False}}) == plain


@pytest.mark.parametrize("values", SHAPES)
def test_gang_adds_one_pod_group_that_every_task_names(values):
    """One PodGroup, gang policy, minCount = every task pod (chief, evaluator, PS, workers);
    every task pod template names it, the reaper's does not. Take those away and the rest is
    the plain cluster's, but for the generation (the pods differ)."""
    plain, gang = render(values), render({**values, **GANG})
    (group,) = by_kind(gang, "PodGroup")
    assert group["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": task_count(gang)}}}
    name = group["metadata"]["name"]
    generation = group["metadata"]["labels"]["tfhelm.io/generation"]
    assert name == f"mnist-gang-{generation}"
    specs = pod_specs(gang)
    assert specs and {n: group_of(s) for n, s in specs.items()} == {n: name for n in specs}
    reaper = [m for m in by_kind(gang, "Deployment") if m["metadata"]["labels"].get("tfhelm.io/role") == "reaper"]
    assert all(group_of(m["spec"]["template"]["spec"]) is None for m in reaper)
    ours, theirs = generation_of(gang), generation_of(plain)
    assert ours != theirs
    assert {stable_name(m): _ungang(m, ours) for m in gang if m["kind"] != "PodGroup"} == \
        {stable_name(m): _ungang(m, theirs) for m in plain}


def _ungang(obj: dict, generation: str) -> dict:
    """An object without what gang adds (the pods' schedulingGroup), its generation written GEN
    and without the cluster spec's hash (it holds the Jobs' names)."""
    obj = json.loads(json.dumps(obj).replace(generation, "GEN"))
    template = (obj.get("spec") or {}).get("template") or {}
    (template.get("spec") or {}).pop("schedulingGroup", None)
    ((template.get("metadata") or {}).get("annotations") or {}).pop("checksum/cluster-spec", None)
    return obj


def generation_of(manifests: list[dict]) -> str:
    return next(m["metadata"]["labels"]["tfhelm.io/generation"] for m in by_kind(manifests, "Job"))


def test_a_split_cluster_has_its_pod_group_in_the_workload_release():
    """`tfhelm up` installs `<name>-ps` (components ps) and `<name>` (workload): the PodGroup is
    the workload release's, and the PS pods of the other release name that same group, whose
    minCount counts them."""
    values = {"clusterName": "mnist", "ps": {"replicas": 2}, "worker": {"replicas": 2}, **GANG}
    ps = render({**values, "components": "ps"}, release="mnist-ps")
    workload = render({**values, "components": "workload"})
    assert not by_kind(ps, "PodGroup")
    (group,) = by_kind(workload, "PodGroup")
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    names = {group_of(s) for s in [*pod_specs(ps).values(), *pod_specs(workload).values()]}
    assert names == {group["metadata"]["name"]}


def test_a_change_of_values_names_a_new_pod_group():
    """A PodGroup's spec is immutable: its name carries the generation, as the Jobs' do, so a
    bigger cluster gets a new group (and its pods, new templates, name it)."""
    small = by_kind(render({"worker": {"replicas": 2}, **GANG}), "PodGroup")[0]
    big = by_kind(render({"worker": {"replicas": 3}, **GANG}), "PodGroup")[0]
    assert small["metadata"]["name"] != big["metadata"]["name"]
    assert big["spec"]["schedulingPolicy"]["gang"]["minCount"] == \
        small["spec"]["schedulingPolicy"]["gang"]["minCount"] + 1


def test_gang_and_a_kueue_queue_exclude_each_other():
    with pytest.raises(RenderError, match=r"gang.enabled and queue.name \"team\" exclude each other"):
        render({"queue": {"name": "team"}, **GANG})


@pytest.mark.parametrize("bad, message", [
    ({"gang": {"enabled": "yes"}}, "gang"),
    ({"gang": {"enabled": True, "minCount": 2}}, "minCount"),
])
def test_the_schema_refuses_bad_gang_values(bad, message):
    with pytest.raises(RenderError, match=message):
        render(bad)


def test_tfhelm_knows_the_pod_group_kind():
    """`tfhelm down` deletes a release's PodGroup by its labels (a cluster that does not serve
    the alpha API has none: optional), and a record holding one is the chart's own."""
    assert "PodGroup" in deploy.RELEASE_KINDS
    assert "PodGroup" in releases.OPTIONAL
    assert "PodGroup" in helm_module.UNINSTALLABLE
    from tfhelm.kuberest import _RESOURCES
    assert _RESOURCES["PodGroup"] == ("/apis/scheduling.k8s.io/v1alpha2", "podgroups")


def test_a_workspace_may_make_pod_groups():
    env = render(userspec.compute_user_values(userspec.UserOptions("alice")), release=userspec.RELEASE,
                 namespace="user-alice", chart=userspec.CHART)
    rules = [r for role in by_kind(env, "Role") for r in role["rules"]]
    assert {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]} in rules
