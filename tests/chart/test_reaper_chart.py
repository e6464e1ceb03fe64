"""The in-cluster reaper in the tf-cluster chart (`reaper:` values, templates/reaper/)."""

import pytest

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


def test_on_by_default_and_off_when_asked():
    """Plain `helm install` with the defaults, a GitOps sync, `tfhelm up`: the PS are reaped."""
    assert reaper_objects(render()) == REAPER_KINDS
    assert reaper_objects(render({"reaper": {"enabled": False}})) == []


def test_lives_in_the_workload_release_never_in_the_ps_release():
    assert reaper_objects(render({**ON, "components": "workload"})) == REAPER_KINDS
    assert reaper_objects(render({**ON, "components": "all"})) == REAPER_KINDS
    ps_release = render({**ON, "components": "ps", "clusterName": "mnist"}, release="mnist-ps")
    assert reaper_objects(ps_release) == [] and by_kind(ps_release, "Deployment")


def test_nothing_to_reap_without_parameter_servers():
    """A collective cluster: the reaper only replaces the tasks of lost nodes
    (tests/chart/test_node_failure.py); without that, there is no reaper."""
    m = render({**ON, "ps": {"replicas": 0}})
    (dep,) = [d for d in by_kind(m, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    assert "--no-reap" in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [r for r in rules(m) if r[1] in (("deployments",), ("services",))], "no PS to delete"
    assert reaper_objects(render({**ON, "ps": {"replicas": 0}, "nodeFailure": {"replaceLostTasks": False}})) == []


def test_role_of_a_split_in_graph_cluster():
    m = render({**ON, "components": "workload", "mode": "in-graph", "chief": {"enabled": True},
                "ps": {"replicas": 2}})
    ps = ("mnist-ps-0", "mnist-ps-1")
    assert rules(m) == [
        (("batch",), ("jobs",), (), ("list", "watch")),
        (("",), ("pods",), (), ("list", "watch")),
        (("",), ("pods",), (), ("patch", "delete")),  # a lost node's tasks (nodeFailure.replaceLostTasks)
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
    assert not [r for r in rules(m) if "patch" in r[3] and r[1] == ("jobs",)], "between-graph: nothing to suspend"
    (cm,) = [x for x in by_kind(m, "ConfigMap") if x["metadata"]["name"] == "mnist-tfconfig"]
    assert "delete_directly=True" in cm["data"]["tfhelm.reaper.incluster.py"]  # never through Helm


def test_deployment_runs_the_shipped_reaper_in_the_task_image_restricted_with_its_own_token():
    """No image to build: the tasks' image's python3 runs the reaper the chart ships beside it
    (files/reaper/, the same loop and rules as `tfhelm reap`)."""
    m = render({"reaper": {"enabled": True, "grace": 5, "completion": "chief", "onFailure": "reap"},
                "chief": {"enabled": True}, "components": "workload", "image": {"tag": "2.21.0-gpu"}})
    (dep,) = [d for d in by_kind(m, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["python3", "/etc/tfhelm/reaper.py"] and c["args"] == [
        "mnist", "--namespace=team-a", "--grace=5", "--completion=chief", "--on-failure=reap", "--replace-lost-tasks",
        "--metrics-port=9090"]
    assert c["image"] == "tensorflow/tensorflow:2.21.0-gpu", "the tasks' image"
    # Its program rides in the config ConfigMap, beside the tasks' (the modules they share, once).
    (cm,) = [x for x in by_kind(m, "ConfigMap") if x["metadata"]["name"] == "mnist-tfconfig"]
    assert {"reaper.py", "launcher.py", "contract.json", "tfhelm.reaper.rules.py", "tfhelm.pod.httpd.py"} <= set(cm["data"])
    assert {"name": "tfhelm-config", "mountPath": "/etc/tfhelm", "readOnly": True} in c["volumeMounts"]
    assert {"name": "tfhelm-config", "configMap": {"name": "mnist-tfconfig"}} in pod["volumes"]
    assert dep["spec"]["template"]["metadata"]["annotations"]["checksum/program"]
    off = render({"reaper": {"enabled": False}})
    assert "reaper.py" not in by_kind(off, "ConfigMap")[0]["data"], "no reaper, no program of it"
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
    m = render({"reaper": {"enabled": True, "image": {"repository": "myorg/python", "tag": "3.12-slim"}},
                "global": {"imageRegistry": "mirror.local"}})
    (dep,) = [d for d in by_kind(m, "Deployment") if d["metadata"]["name"] == "mnist-reaper"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "mirror.local/myorg/python:3.12-slim"


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
