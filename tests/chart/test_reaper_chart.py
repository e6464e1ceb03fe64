"""The in-cluster reaper in the tf-cluster chart (`reaper:` values, templates/reaper/)."""

import pytest

from tfhelm.chart import chart_version
from tfhelm.cluster.manifests import by_kind, job_names
from tfhelm.errors import RenderError

from .conftest import kinds, render

ON = {"reaper": {"enabled": True}}
REAPER_KINDS = [("Deployment", "mnist-reaper"), ("Role", "mnist-reaper"),
                ("RoleBinding", "mnist-reaper"), ("ServiceAccount", "mnist-reaper")]


def reaper_objects(manifests):
    return sorted(k for k in kinds(manifests) if k[1] == "mnist-reaper")


def rules(manifests):
    (role,) = by_kind(manifests, "Role")
    return [(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r.get("resourceNames", ())),
             tuple(r["verbs"])) for r in role["rules"]]


def test_off_by_default():
    assert reaper_objects(render()) == []


def test_lives_in_the_workload_release_never_in_the_ps_release():
    assert reaper_objects(render({**ON, "components": "workload"})) == REAPER_KINDS
    assert reaper_objects(render({**ON, "components": "all"})) == REAPER_KINDS
    ps_release = render({**ON, "components": "ps", "clusterName": "mnist"}, release="mnist-ps")
    assert reaper_objects(ps_release) == [] and by_kind(ps_release, "Deployment")


def test_nothing_to_reap_without_parameter_servers():
    assert reaper_objects(render({**ON, "ps": {"replicas": 0}})) == []


def test_role_of_a_split_in_graph_cluster():
    m = render({**ON, "components": "workload", "mode": "in-graph", "chief": {"enabled": True},
                "ps": {"replicas": 2}})
    ps = ("mnist-ps-0", "mnist-ps-1")
    assert rules(m) == [
        (("batch",), ("jobs",), (), ("list", "watch")),
        (("",), ("pods",), (), ("list", "watch")),
        (("batch",), ("jobs",), (job_names(m)["worker"],), ("patch",)),
        (("",), ("events",), (), ("create",)),
        (("apps",), ("deployments",), (), ("list",)),
        (("apps",), ("deployments",), ps, ("delete",)),
        (("",), ("services",), (), ("list",)),
        (("",), ("services",), ps, ("delete",)),
    ]
    assert not by_kind(m, "ClusterRole") and not by_kind(m, "ClusterRoleBinding")


@pytest.mark.parametrize("components", ["all", "workload"])
def test_the_reaper_never_reads_a_secret_nor_runs_helm(components):
    """Helm's release Secrets cannot be limited by name (the revision is in it), so the
    reaper deletes the PS objects by name and leaves the release record alone."""
    m = render({**ON, "components": components})
    assert not [r for r in rules(m) if r[1] in (("secrets",), ("configmaps",))]
    assert not [r for r in rules(m) if "patch" in r[3]], "between-graph: nothing to suspend"
    (dep,) = [d for d in by_kind(m, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    assert "--delete-directly" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


def test_deployment_runs_tfhelm_reap_restricted_with_its_own_token():
    m = render({"reaper": {"enabled": True, "grace": 5, "completion": "chief", "onFailure": "reap"},
                "chief": {"enabled": True}, "components": "workload"})
    (dep,) = [d for d in by_kind(m, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["tfhelm"] and c["args"] == [
        "reap", "mnist", "--namespace=team-a", "--grace=5", "--completion=chief", "--on-failure=reap",
        "--forever", "--delete-directly", "--metrics-port=9090"]
    assert c["image"] == f"tfhelm/tfhelm:{chart_version()}", "tag defaults to the chart's version (tfhelm's)"
    assert pod["serviceAccountName"] == "mnist-reaper" and pod["automountServiceAccountToken"] is True
    (sa,) = by_kind(m, "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False, "only the reaper's pod mounts the token"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    (binding,) = by_kind(m, "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mnist-reaper", "namespace": "team-a"}]


def test_image_override():
    m = render({"reaper": {"enabled": True, "image": {"repository": "myorg/tfhelm", "tag": "0.1.0"}}})
    (dep,) = [d for d in by_kind(m, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "myorg/tfhelm:0.1.0"


@pytest.mark.parametrize("values,message", [
    ({"reaper": {"enabled": True, "completion": "chief"}}, 'reaper.completion is "chief" but chief.enabled is false'),
    ({"reaper": {"enabled": True, "completion": "worker-0"}, "mode": "in-graph", "chief": {"enabled": True}},
     "never holds in-graph"),
])
def test_impossible_completion_fails_with_a_message(values, message):
    with pytest.raises(RenderError, match=message):
        render(values)


@pytest.mark.parametrize("values,message", [
    ({"reaper": {"grace": -1}}, "reaper.grace"),
    ({"reaper": {"completion": "all"}}, "reaper.completion"),
    ({"reaper": {"onFailure": "delete"}}, "reaper.onFailure"),
    ({"reaper": {"typo": 1}}, "typo"),
])
def test_schema_rejects_bad_reaper_values(values, message):
    with pytest.raises(RenderError, match=message):
        render(values)
