"""One contract between the charts and tfhelm (charts/tf-cluster/charts/tf-cluster-lib/files/
contract.yaml): the schemas are generated from it and are current, and where the chart and
the CLI both judge a name, they judge it alike."""

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from tfhelm import contract
from tfhelm.cluster.values import is_configmap_key
from tfhelm.errors import RenderError, SpecError
from tfhelm.workspace import userspec

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
        values = userspec.compute_user_values(userspec.UserOptions("alice", storage_class=name))
        cli = True
    except SpecError:
        values, cli = {"userName": "alice", "storage": {"storageClassName": name}}, False
    assert _chart_takes(values, chart=userspec.CHART, release=userspec.RELEASE,
                        namespace=userspec.user_namespace("alice")) == cli, name


@pytest.mark.parametrize("name", ["mnist", "a", "x-1", "1a", "a-", "A", "a_b", "a\n"])
def test_a_cluster_name_is_a_dns_1035_label_for_the_chart_and_the_cli_alike(name):
    from tfhelm.cluster import spec
    try:
        spec.validate_name(name)
        cli = True
    except SpecError:
        cli = False
    assert _chart_takes({"clusterName": name}) == cli, repr(name)


# -- the task contract has one home

GENERATED = ("files/task/", "files/reaper/", "files/authproxy/", "files/contract.json")


def _contract_names() -> set[str]:
    c = contract.contract()
    return ({*c["env"].values(), c["keras"]["env"], *c["labels"].values(), *c["annotations"].values(),
             *c["task"]["retryErrors"]})


def _literals(path: Path) -> list[str]:
    """The string constants of a Python module (not its docstrings), or a template's text
    without its comments."""
    text = path.read_text()
    if path.suffix != ".py":
        text = re.sub(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", "", text, flags=re.S)
        return [re.sub(r"(^|\s)#.*$", "", line) for line in text.splitlines()]
    tree = ast.parse(text)
    prose = {id(n.body[0].value) for n in ast.walk(tree)  # docstrings, and a command's help text
             if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
             and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    prose |= {id(c) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg == "help" for c in ast.walk(k.value)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in prose]


def test_the_task_contract_is_written_once():
    """The environment a task reads, the Keras switch, label and annotation keys, the
    retryable errors: no literal of them in the code, the templates or the build scripts but
    the contract (generated copies aside)."""
    names = _contract_names()
    sources = [p for base in ("tfhelm", "hack", "tfhelm_dev", "bench") for p in (REPO / base).rglob("*.py")]
    sources += [p for p in (REPO / "charts").rglob("*") if p.suffix in (".tpl", ".yaml", ".txt")
                and "templates" in p.parts]
    found = []
    for path in sources:
        rel = path.relative_to(REPO).as_posix()
        if any(g in rel for g in GENERATED) or "__pycache__" in rel:
            continue
        for literal in _literals(path):
            found += [f"{rel}: {name}" for name in names if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", literal)]
    assert not found, found
