"""Every value is documented and in the strict schema; chart READMEs do not drift."""

import json
import re
import shutil
import subprocess

import pytest
import yaml

from tfhelm.chart import charts_dir

CHARTS = sorted(p.name for p in charts_dir().iterdir() if (p / "Chart.yaml").exists())
HELM_DOCS = shutil.which("helm-docs") or str(charts_dir().parent / "bin" / "helm-docs")


def leaves(values: dict, prefix: str = ""):
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and not _passthrough(path):
            yield from leaves(value, path + ".")
        else:
            yield path


def _passthrough(path: str) -> bool:
    return path.split(".")[-1] in {"resources", "podSecurityContext", "containerSecurityContext",
                                   "affinity", "parameters", "nodeSelector", "podLabels", "podAnnotations",
                                   "objects"}  # quota.objects: ResourceQuota keys, by pattern


def schema_node(schema: dict, path: str) -> dict | None:
    node = schema
    for key in path.split("."):
        while "$ref" in node:  # "#/$defs/NAME": shared fragments
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        props = node.get("properties", {})
        if key not in props:
            return None
        node = props[key]
    return node


@pytest.mark.parametrize("chart", CHARTS)
def test_every_value_is_in_the_schema(chart):
    root = charts_dir() / chart
    values = yaml.safe_load((root / "values.yaml").read_text())
    schema = json.loads((root / "values.schema.json").read_text())
    assert schema.get("additionalProperties") is False
    missing = [p for p in leaves(values) if schema_node(schema, p) is None]
    assert not missing, f"values without a schema entry: {missing}"


@pytest.mark.parametrize("chart", CHARTS)
def test_every_value_has_a_helm_docs_comment(chart):
    """helm-docs lists every key in the values table (VALUES.md where the chart has one,
    else its README); each needs a description there, on itself or on the pass-through
    object that holds it."""
    root = charts_dir() / chart
    rows = re.findall(r"^\| ([\w.\-\[\]\"/]+) \| [^|]* \| .* \| (.*) \|$",
                      (root / _values_doc(root)[0]).read_text(), re.M)
    described = {key for key, desc in rows if desc.strip()}
    values = yaml.safe_load((root / "values.yaml").read_text())
    undocumented = [p for p in leaves(values)
                    if not any(".".join(p.split(".")[:n]) in described for n in range(1, p.count(".") + 2))]
    assert not undocumented, f"values without a `# --` comment: {undocumented}"


def _values_doc(root) -> tuple[str, str]:
    """(generated file, its helm-docs template) holding the chart's values table."""
    if (root / "VALUES.md.gotmpl").exists():
        return "VALUES.md", "VALUES.md.gotmpl"
    return "README.md", "README.md.gotmpl"


@pytest.mark.parametrize("chart", CHARTS)
def test_chart_docs_are_generated_from_values(chart):
    root = charts_dir() / chart
    for doc, template in {("README.md", "README.md.gotmpl"), _values_doc(root)}:
        result = subprocess.run([HELM_DOCS, "--dry-run", "--chart-search-root", str(root),
                                 "--template-files", template], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert result.stdout == (root / doc).read_text(), f"{doc} drifted: run `make docs`"


def test_the_values_reference_is_not_stored_in_every_release():
    """Helm stores every chart file in each release Secret; the chart keeps its README (what
    Artifact Hub shows) and leaves the values table, which values.yaml already holds, out."""
    ignored = (charts_dir() / "tf-cluster" / ".helmignore").read_text().split()
    assert {"VALUES.md", "*.gotmpl"} <= set(ignored) and "README.md" not in ignored
