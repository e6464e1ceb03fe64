"""Job names carry the cluster's generation, so a changed cluster gets new Jobs (a Job's pod
template is immutable) and both releases of a split cluster agree on every host."""

import pytest

from tfhelm.cluster.manifests import by_kind, cluster_config, job_names
from tests.helpers.pods import task_tf_configs

from .conftest import render

BASE = {"clusterName": "mnist", "worker": {"replicas": 2}, "ps": {"replicas": 1}, "chief": {"enabled": True}}


def generation(values: dict) -> str:
    return cluster_config(render(values))[1]


@pytest.mark.parametrize("change", [
    {"worker": {"replicas": 3}},
    {"image": {"tag": "2.21.0-gpu"}},
    {"chief": {"enabled": True, "resources": {"limits": {"memory": "6Gi"}}}},
    {"code": {"args": ["--epochs", "3"]}},
])
def test_a_change_to_what_pods_are_made_of_renames_every_job(change):
    before = job_names(render(BASE))
    after = job_names(render({**BASE, **change}))
    assert set(before) == set(after) == {"worker", "chief"}
    assert not set(before.values()) & set(after.values())


def test_the_reaper_settings_and_the_release_split_keep_the_generation():
    assert generation(BASE) == generation({**BASE, "reaper": {"grace": 600}})
    # Nor what no task pod carries: the helm test pod, object annotations.
    assert generation(BASE) == generation({**BASE, "test": {"enabled": False, "timeout": 30},
                                           "commonAnnotations": {"team": "a"}})
    assert generation(BASE) == generation({**BASE, "components": "workload"})
    assert generation(BASE) == generation({**BASE, "components": "ps"})


def test_both_releases_of_a_split_cluster_give_every_task_the_same_cluster():
    ps = render({**BASE, "components": "ps"}, release="mnist-ps")
    workload = render({**BASE, "components": "workload"}, release="mnist")
    clusters = {str(c["cluster"]) for c in (task_tf_configs(ps) | task_tf_configs(workload)).values()}
    assert len(clusters) == 1
    assert cluster_config(ps) == cluster_config(workload)


def test_job_names_carry_the_generation_and_services_stay():
    m = render(BASE)
    g = cluster_config(m)[1]
    assert len(g) == 6 and int(g, 16) >= 0
    assert job_names(m) == {"worker": f"mnist-worker-{g}", "chief": f"mnist-chief-{g}"}
    assert {j["metadata"]["labels"]["tfhelm.io/generation"] for j in by_kind(m, "Job")} == {g}
    services = {s["metadata"]["name"] for s in by_kind(m, "Service")}
    assert {"mnist-worker", "mnist-chief"} <= services
    worker_host = cluster_config(m)[0]["worker"][1]
    assert worker_host == f"mnist-worker-{g}-1.mnist-worker.team-a.svc.cluster.local:2222"
