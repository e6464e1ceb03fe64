import json

import pytest

from tfhelm.cluster import spec
from tfhelm.cluster.spec import Shape
from tfhelm.errors import SpecError


def test_hosts_follow_the_dns_scheme():
    cluster = spec.cluster_spec("mnist", "team-a", Shape(workers=2, ps=1, chief=True), generation="0a1b2c")
    assert cluster == {  # Job names carry the generation; the headless Services do not
        "chief": ["mnist-chief-0a1b2c-0.mnist-chief.team-a.svc:2222"],
        "worker": ["mnist-worker-0a1b2c-0.mnist-worker.team-a.svc:2222",
                   "mnist-worker-0a1b2c-1.mnist-worker.team-a.svc:2222"],
        "ps": ["mnist-ps-0.team-a.svc:2222"],
    }


def test_cluster_domain_and_port_are_applied():
    cluster = spec.cluster_spec("a", "ns", Shape(workers=1), port=3333, cluster_domain="cluster.local")
    assert cluster["worker"] == ["a-worker-0.a-worker.ns.svc.cluster.local:3333"]


def test_the_evaluator_gets_the_training_cluster_but_is_not_in_it():
    shape = Shape(workers=2, ps=1, evaluator=True)
    cluster = spec.cluster_spec("a", "ns", shape)
    assert set(cluster) == {"worker", "ps"}
    assert spec.tf_config(cluster, "evaluator", 0) == {"cluster": cluster, "task": {"type": "evaluator", "index": 0}}
    assert ("evaluator", 0) in spec.tasks(shape)
    spec.check_task(shape, "evaluator", 0)
    with pytest.raises(SpecError, match="evaluator:0 is not in this cluster"):
        spec.check_task(Shape(workers=2), "evaluator", 0)


def test_roles_without_tasks_are_left_out():
    assert set(spec.cluster_spec("a", "ns", Shape(workers=3))) == {"worker"}


def test_tf_config_names_the_task():
    cluster = spec.cluster_spec("a", "ns", Shape(workers=2, ps=1))
    assert spec.tf_config(cluster, "worker", 1)["task"] == {"type": "worker", "index": 1}


def test_tf_config_rejects_a_task_outside_the_cluster():
    cluster = spec.cluster_spec("a", "ns", Shape(workers=2))
    with pytest.raises(SpecError, match="worker:2 is not in this cluster"):
        spec.tf_config(cluster, "worker", 2)


def test_dumps_is_canonical_json():
    text = spec.dumps({"task": {"type": "ps", "index": 0}, "cluster": {"ps": ["h:1"]}})
    assert text == '{"cluster":{"ps":["h:1"]},"task":{"index":0,"type":"ps"}}'
    assert json.loads(text)["task"]["index"] == 0


@pytest.mark.parametrize("text,expected", [("worker:3", ("worker", 3)), ("ps:0", ("ps", 0))])
def test_parse_task(text, expected):
    assert spec.parse_task(text) == expected


@pytest.mark.parametrize("text", ["worker", "gpu:1", "worker:-1", "worker:x"])
def test_parse_task_rejects_garbage(text):
    with pytest.raises(SpecError, match="--task"):
        spec.parse_task(text)


@pytest.mark.parametrize("shape,message", [
    (Shape(workers=0), "at least 1"),
    (Shape(workers=-3), "at least 1"),
    (Shape(workers=100_001), "over the limit of 100000"),
    (Shape(workers=1, ps=101), "between 0 and 100"),
])
def test_shape_bounds(shape, message):
    with pytest.raises(SpecError, match=message):
        shape.validate()


@pytest.mark.parametrize("name", ["Mnist", "1abc", "a_b", "a.b", "-a", "a-", ""])
def test_names_must_be_dns_labels_starting_with_a_letter(name):
    with pytest.raises(SpecError, match="not a valid name"):
        spec.validate_name(name)


def test_name_too_long_for_the_hostnames():
    spec.validate_name("a" * spec.MAX_NAME)
    with pytest.raises(SpecError, match="at most 44 characters"):
        spec.validate_name("a" * (spec.MAX_NAME + 1))


def test_the_contracts_name_limit_is_what_the_release_and_hostnames_leave():
    """contract.yaml's clusterName: the PS release `<name>-ps` is a Helm release name, and
    `<name>-worker-<generation>-9999` a DNS label."""
    assert spec.MAX_NAME == min(spec.HELM_RELEASE_MAX - len(spec.PS_RELEASE_SUFFIX),
                                spec.DNS_LABEL_MAX - len(spec.longest_hostname("", Shape(workers=10_000))))


@pytest.mark.parametrize("workers,limit", [(1, 44), (10_000, 44), (10_001, 43), (100_000, 43)])
def test_the_name_limit_depends_on_the_worker_count(workers, limit):
    """44 characters stay allowed below 10,001 workers; a fifth index digit takes one."""
    shape = Shape(workers=workers, ps=spec.MAX_PS, chief=True, evaluator=True)
    assert spec.max_name(shape) == limit
    assert len(spec.longest_hostname("a" * limit, shape)) == spec.DNS_LABEL_MAX
    spec.validate_name("a" * limit, shape=shape)
    with pytest.raises(SpecError, match=f"use at most {limit} characters"):
        spec.validate_name("a" * (limit + 1), shape=shape)


def test_a_long_name_for_many_workers_says_how_to_fix_it():
    with pytest.raises(SpecError) as e:
        spec.validate_name("a" * 44, "--name", Shape(workers=100_000))
    assert str(e.value) == (
        f"--name: '{'a' * 44}' is 44 characters; hostnames with 100,000 workers such as "
        f"'{'a' * 44}-worker-000000-99999' must fit in 63 (use at most 43 characters, "
        "or at most 10,000 workers)")


def test_compact_spec_expands_to_the_hosts_and_does_not_grow_with_n():
    small = spec.compact_spec("m", "ns", Shape(workers=8, ps=2), generation="abcdef")
    big = spec.compact_spec("m", "ns", Shape(workers=100_000, ps=2), generation="abcdef")
    assert small == {"ps": {"count": 2, "host": "m-ps-{index}.ns.svc:2222"},
                     "worker": {"count": 8, "host": "m-worker-abcdef-{index}.m-worker.ns.svc:2222"}}
    assert spec.dumps(big) == spec.dumps(small).replace('"count":8', '"count":100000')
    cluster = spec.cluster_spec("m", "ns", Shape(workers=100_000, ps=2), generation="abcdef")
    assert len(cluster["worker"]) == 100_000
    assert cluster["worker"][99_999] == "m-worker-abcdef-99999.m-worker.ns.svc:2222"
