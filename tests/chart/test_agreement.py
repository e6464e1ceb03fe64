"""The chart's `_helpers-names.tpl` and tfhelm/cluster/spec.py must agree: every pod's TF_CONFIG
as rendered by Helm equals `tfhelm tfconfig` for the same shape."""

import json
import re

import pytest
from typer.testing import CliRunner

from tfhelm.chart import default_values
from tfhelm.cli import app
from tfhelm.cluster import manifests, spec
from tfhelm.errors import RenderError, SpecError
from tests.helpers.pods import task_tf_configs

from .conftest import render

SHAPES = [  # (name, workers, ps, chief, evaluator)
    ("a", 1, 0, False, False),
    ("mnist", 1, 1, False, False),
    ("mnist", 4, 0, True, False),
    ("x-1-y", 3, 2, False, True),
    ("resnet50", 2, 3, True, True),
    ("b" * spec.MAX_NAME, 12, 1, True, True),
    ("z9", 1, 5, True, False),
]


@pytest.mark.parametrize("name,workers,ps,chief,evaluator", SHAPES)
@pytest.mark.parametrize("namespace", ["default", "team-a"])
def test_every_rendered_tf_config_matches_tfhelm_tfconfig(name, workers, ps, chief, evaluator, namespace):
    values = {"clusterName": name, "worker": {"replicas": workers}, "ps": {"replicas": ps},
              "chief": {"enabled": chief}, "evaluator": {"enabled": evaluator}}
    docs = render(values, release=name, namespace=namespace)
    rendered = task_tf_configs(docs)
    expected_tasks = spec.tasks(spec.Shape(workers, ps, chief, evaluator))
    assert sorted(rendered) == sorted(expected_tasks)
    # spec.py mirrors the naming; the generation (a hash of the values) is the chart's alone.
    generation = manifests.cluster_config(docs)[1]
    mirrored = spec.cluster_spec(name, namespace, spec.Shape(workers, ps, chief, evaluator),
                                 cluster_domain=default_values()["clusterDomain"], generation=generation)
    assert all(c["cluster"] == mirrored for c in rendered.values())
    assert {j["metadata"]["name"] for j in manifests.by_kind(docs, "Job")} == {
        spec.job_name(name, r, generation) for r in spec.JOB_ROLES if spec.Shape(workers, ps, chief, evaluator).count(r)}
    runner = CliRunner()
    shape_args = ["--workers", str(workers), "--ps", str(ps), "-n", namespace,
                  "--chief" if chief else "--no-chief", "--evaluator" if evaluator else "--no-evaluator"]
    for role, index in expected_tasks:
        result = runner.invoke(app, ["tfconfig", name, "--task", f"{role}:{index}", *shape_args])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == rendered[(role, index)], (role, index)


def test_port_and_cluster_domain_agree():
    values = {"port": 3000, "clusterDomain": "cluster.local", "worker": {"replicas": 2}}
    docs = render(values, release="m", namespace="ns")
    rendered = task_tf_configs(docs)
    cluster = spec.cluster_spec("m", "ns", spec.Shape(workers=2, ps=1), 3000, "cluster.local",
                                manifests.cluster_config(docs)[1])
    assert rendered[("worker", 1)] == spec.tf_config(cluster, "worker", 1)


def test_the_schema_takes_the_names_the_cli_takes():
    """clusterName (and fullnameOverride) are as long as `tfhelm up --name` allows: every
    hostname, `<name>-worker-<generation>-9999` included, fits a DNS label."""
    ok = render({"clusterName": "c" * spec.MAX_NAME})
    assert max(len(h.split(".")[0]) for hosts in manifests.cluster_config(ok)[0].values() for h in hosts) <= 63
    for key in ("clusterName", "fullnameOverride"):
        with pytest.raises(RenderError, match=key):
            render({key: "c" * (spec.MAX_NAME + 1)})


@pytest.mark.parametrize("workers,longest_name", [(10_000, 44), (100_000, 43)])
def test_name_limit_follows_the_worker_count(workers, longest_name):
    """44-character names keep working below 10,001 workers; 100,000 take one more digit."""
    values = {"worker": {"replicas": workers}}
    render({**values, "clusterName": "c" * longest_name})
    if longest_name < spec.MAX_NAME:
        with pytest.raises(RenderError, match=rf"shorten clusterName to at most {longest_name} characters for {workers} worker"):
            render({**values, "clusterName": "c" * (longest_name + 1)})
    with pytest.raises(SpecError, match=f"use at most {longest_name} characters"):
        spec.validate_name("c" * (longest_name + 1), shape=spec.Shape(workers))



def test_tfhelm_tfconfig_prints_the_same_text_as_before_the_compact_spec():
    """Same hosts, same order, canonical JSON: what 0.2.0 printed from the host lists
    (the generation aside: a hash of the values, the chart version included)."""
    result = CliRunner().invoke(app, ["tfconfig", "m", "-n", "ns", "--workers", "2", "--ps", "2",
                                      "--task", "worker:1"])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(
        r'\{"cluster":\{"ps":\["m-ps-0\.ns\.svc\.cluster\.local:2222","m-ps-1\.ns\.svc\.cluster\.local:2222"\],'
        r'"worker":\["m-worker-([0-9a-f]{6})-0\.m-worker\.ns\.svc\.cluster\.local:2222",'
        r'"m-worker-\1-1\.m-worker\.ns\.svc\.cluster\.local:2222"\]\},"task":\{"index":1,"type":"worker"\}\}\n',
        result.stdout), result.stdout
