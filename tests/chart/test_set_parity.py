"""`tfhelm render --set/--set-string/--set-json` gives exactly what `helm template` gives
for the same flags: tricky keys, lists, escapes, typing and Helm's precedence."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from tfhelm.chart import chart_path
from tfhelm.cli import app
from tfhelm.valueflags import SetFlags, merge

from .conftest import helm

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))


def objects(text: str) -> list[dict]:
    return sorted((d for d in yaml.safe_load_all(text) if d),
                  key=lambda d: (d["kind"], d["metadata"]["name"]))


CASES = {
    # two --set on one list item: the second adds to the first (a plain dict merge loses it)
    "same list item twice": ["--set", "worker.env[0].name=EPOCHS", "--set-string", "worker.env[0].value=3"],
    "escaped dots in a key": ["--set", r"worker.podAnnotations.tfhelm\.io/note=x"],
    "escaped comma in a value": ["--set", r"worker.podAnnotations.a=x\,y,worker.podAnnotations.b=z"],
    "list syntax": ["--set", "code.args={--epochs,3,--lr}"],
    "nested list index": ["--set", "worker.tolerations[1].key=gpu,worker.tolerations[1].operator=Exists"],
    "string of digits stays a string": ["--set-string", "worker.podLabels.build=007"],
    "set-json wins below set": ["--set", "worker.backoffLimitPerIndex=2", "--set-json", "worker.backoffLimitPerIndex=5"],
    "set-string applied after set": ["--set-string", "worker.podLabels.a=s", "--set", "worker.podLabels.a=n"],
    "null removes a default": ["--set", "worker.backoffLimitPerIndex=null"],
    "set-json object form": ["--set-json", '{"worker": {"env": [{"name": "A", "value": "1"}]}}'],
    "equals sign in a value": ["--set", "worker.podAnnotations.q=a=b"],
}


@pytest.mark.parametrize("flags", CASES.values(), ids=CASES.keys())
def test_render_matches_helm_template(flags):
    ours = runner.invoke(app, ["render", "mnist", "-n", "team-a", "--ps", "0", *flags])
    theirs = helm("template", "mnist", str(chart_path("tf-cluster")), "-n", "team-a",
                  "--set", "clusterName=mnist,components=workload,ps.replicas=0", *flags)
    assert (ours.exit_code == 0) == (theirs.returncode == 0), (ours.output, theirs.stderr)
    if ours.exit_code == 0:
        assert objects(ours.stdout) == objects(theirs.stdout)


def test_the_same_list_item_twice_keeps_both_fields():
    merged = merge([], SetFlags(set=["worker.env[0].name=A"], set_string=["worker.env[0].value=1"]))
    assert merged == {"worker": {"env": [{"name": "A", "value": "1"}]}}


def test_set_indexes_into_a_list_from_a_values_file():
    files = [{"worker": {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}}]
    merged = merge(files, SetFlags(set_string=["worker.env[1].value=20"]))
    assert merged["worker"]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}]


def test_helm_types_values_the_way_it_always_does():
    merged = merge([], SetFlags(set=["a=1,b=true,c=null,d=1.5,e=0x10,f=007,g=1e3"]))
    assert merged == {"a": 1, "b": True, "c": None, "d": "1.5", "e": "0x10", "f": "007", "g": "1e3"}


def test_values_files_are_the_lowest_precedence(tmp_path):
    f = tmp_path / "v.yaml"
    f.write_text("worker: {replicas: 2, gpus: 1}\n")
    result = runner.invoke(app, ["render", "m", "-f", str(f), "--set", "worker.replicas=3", "--workers", "4",
                                 "--values-only"])
    (ps, workload) = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert workload["worker"] == {"replicas": 4, "gpus": 1}


def test_a_values_file_written_for_gitops_reads_the_same_in_helm(tmp_path):
    """`--values-only` (a GitOps repo's values file) read by Helm, whose YAML is Go's: strings
    Go would read as numbers stay strings (an image tag 1e10, not 1e+10)."""
    out = runner.invoke(app, ["render", "m", "-n", "team-a", "--ps", "0", "--values-only", "--one-release",
                              "--set-string", "image.tag=1e10,worker.podLabels.build=6e1234"])
    assert out.exit_code == 0, out.output
    values = tmp_path / "values.yaml"
    values.write_text(out.stdout)
    theirs = helm("template", "m", str(chart_path("tf-cluster")), "-n", "team-a", "-f", str(values))
    assert theirs.returncode == 0, theirs.stderr
    (job,) = [d for d in objects(theirs.stdout) if d["kind"] == "Job" and "worker" in d["metadata"]["name"]]
    pod = job["spec"]["template"]
    (tf,) = [c for c in pod["spec"]["containers"] if c["name"] == "tensorflow"]
    assert tf["image"].endswith(":1e10") and pod["metadata"]["labels"]["build"] == "6e1234"
