"""One contract between the charts and tfhelm (charts/tf-cluster/charts/tf-cluster-lib/files/
contract.yaml): the schemas are generated from it and are current, and where the chart and
the CLI both judge a name, they judge it alike."""

import importlib.util
from pathlib import Path

import pytest

from tfhelm import contract
from tfhelm.cluster.values import is_configmap_key
from tfhelm.errors import RenderError, SpecError
from tfhelm.workspace import rules

from .conftest import render

REPO = Path(__file__).resolve().parents[2]


def _schemas():
    spec = importlib.util.spec_from_file_location("schemas", REPO / "hack" / "schemas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_schemas_helm_reads_are_generated_from_their_sources():
    """values.schema.json is written by `make schemas` from values.schema.yaml, the shared
    $defs and the contract."""
    module = _schemas()
    for chart in module.NAMES:
        path = REPO / "charts" / chart / "values.schema.json"
        assert path.read_text() == module.schema_json(chart), f"{path} is stale: run `make schemas`"


def test_the_schemas_take_their_limits_and_patterns_from_the_contract():
    schema = _schemas().schema("tf-cluster")
    props, defs = schema["properties"], schema["$defs"]
    assert props["worker"]["properties"]["replicas"]["maximum"] == contract.limit("workers") == 100_000
    assert props["ps"]["properties"]["replicas"]["maximum"] == contract.limit("ps") == 100
    assert defs["clusterName"]["maxLength"] == contract.limit("clusterName") == 44
    assert defs["dnsLabel"]["pattern"] == "^" + contract.contract()["patterns"]["dns1123Label"] + "$"


def _chart_takes(values: dict, chart: str = "tf-cluster", **kwargs) -> bool:
    try:
        render(values, chart=chart, **kwargs)
        return True
    except RenderError:
        return False


@pytest.mark.parametrize("key", ["train.py", ".env", "a..b", "a.", "_x", ".", "..", "..a", "...", "a b", "a/b"])
def test_a_file_is_a_configmap_key_for_the_chart_and_the_cli_alike(key):
    """Kubernetes' rule: not `.` or `..`, nor starting with `..` (the CLI took `...`, the
    schema `..a`; the API server refuses both)."""
    values = {"code": {"source": "inline", "script": "train.py", "inline": "print(1)\n",
                       "extraFiles": {key: "x = 1\n"}}}
    assert _chart_takes(values) == is_configmap_key(key), key


@pytest.mark.parametrize("name", ["local-path", "nfs.csi.k8s.io", "a..b", "a.-b", "-a", "a.", "A", "a" * 254])
def test_a_storage_class_name_is_a_dns_subdomain_for_the_chart_and_the_cli_alike(name):
    """`tfhelm user add --storage-class` took `a..b`, which the schema (and Kubernetes) refuse."""
    try:
        values = rules.compute_user_values(rules.UserOptions("alice", storage_class=name))
        cli = True
    except SpecError:
        values, cli = {"userName": "alice", "storage": {"storageClassName": name}}, False
    assert _chart_takes(values, chart=rules.CHART, release=rules.RELEASE,
                        namespace=rules.user_namespace("alice")) == cli, name


@pytest.mark.parametrize("name", ["mnist", "a", "x-1", "1a", "a-", "A", "a_b", "a\n"])
def test_a_cluster_name_is_a_dns_1035_label_for_the_chart_and_the_cli_alike(name):
    from tfhelm.cluster import spec
    try:
        spec.validate_name(name)
        cli = True
    except SpecError:
        cli = False
    assert _chart_takes({"clusterName": name}) == cli, repr(name)
