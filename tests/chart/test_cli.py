"""The CLI's offline commands (render, dry-run, tfconfig) and its handling of bad input."""

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

from tfhelm.cli import app
from tfhelm.cluster import manifests
from tests.helpers.pods import task_tf_configs

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch, tmp_path):
    """Offline commands must not need a cluster; a missing kubeconfig proves they don't use one."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))


def docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_up_dry_run_prints_eight_workers_with_their_tf_config():
    result = runner.invoke(app, ["up", "--workers", "8", "--ps", "2", "--name", "demo", "--dry-run"])
    assert result.exit_code == 0, result.output
    manifests = docs(result.stdout)
    configs = task_tf_configs(manifests)
    workers = sorted(i for role, i in configs if role == "worker")
    assert workers == list(range(8))
    assert configs[("worker", 5)]["task"] == {"type": "worker", "index": 5}
    assert configs[("worker", 5)]["cluster"]["ps"] == ["demo-ps-0.default.svc.cluster.local:2222", "demo-ps-1.default.svc.cluster.local:2222"]


def test_dry_run_shows_both_releases():
    result = runner.invoke(app, ["up", "--workers", "2", "--name", "demo", "--dry-run", "-n", "team-a"])
    assert "# release: demo-ps" in result.stdout and "# release: demo\n" in result.stdout


def test_up_dry_run_ships_a_local_script_beside_the_releases(tmp_path, monkeypatch):
    """What `up` would create: the code in a ConfigMap named by its content, the releases
    mounting it by name; `render` (manifests that stand alone, e.g. for GitOps) keeps it
    in the release's own code ConfigMap."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("import util\n")
    (tmp_path / "util.py").write_text("SHIPPED_MARKER = 1\n")
    result = runner.invoke(app, ["up", "--workers", "2", "--name", "m", "--script", "train.py", "--dry-run"])
    assert result.exit_code == 0, result.output
    shipped, *released = docs(result.stdout)
    assert shipped["metadata"]["name"].startswith("m-code-") and shipped["immutable"] is True
    assert shipped["data"] == {"train.py": "import util\n", "util.py": "SHIPPED_MARKER = 1\n"}
    assert "SHIPPED_MARKER" not in yaml.safe_dump_all(released)
    (job,) = [d for d in released if d["kind"] == "Job"]
    assert {"name": "code", "configMap": {"name": shipped["metadata"]["name"]}} in job["spec"]["template"]["spec"]["volumes"]
    rendered = docs(runner.invoke(app, ["render", "m", "--workers", "2", "--script", "train.py"]).stdout)
    assert [d["data"] for d in rendered if d["metadata"]["name"] == "m-code"] == [shipped["data"]]


def test_up_without_name_generates_one():
    result = runner.invoke(app, ["up", "--workers", "1", "--dry-run"])
    assert result.exit_code == 0
    names = {d["metadata"]["labels"]["tfhelm.io/cluster"] for d in docs(result.stdout)}
    assert len(names) == 1 and names.pop().startswith("tf-")


def test_render_values_only_is_ready_for_gitops():
    result = runner.invoke(app, ["render", "mnist", "--workers", "4", "--ps", "1", "--set", "worker.gpus=1"])
    assert result.exit_code == 0
    values = docs(runner.invoke(app, ["render", "mnist", "--workers", "4", "--values-only"]).stdout)
    assert [v["components"] for v in values] == ["ps", "workload"]
    assert all(v["clusterName"] == "mnist" and v["worker"]["replicas"] == 4 for v in values)


def test_script_args_after_double_dash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('train')\n")
    result = runner.invoke(app, ["render", "m", "--script", "train.py", "--", "--epochs", "3"])
    job = next(d for d in docs(result.stdout) if d["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "script", "/opt/tfhelm/code/train.py", "--epochs", "3"]


def test_tfconfig_offline():
    result = runner.invoke(app, ["tfconfig", "mnist", "--workers", "3", "--task", "worker:2", "-n", "x"])
    assert json.loads(result.stdout)["task"] == {"type": "worker", "index": 2}


def test_tfconfig_for_a_notebook_driving_an_in_graph_cluster():
    result = runner.invoke(app, ["tfconfig", "m", "-n", "u", "--workers", "2", "--ps", "1",
                                 "--set", "mode=in-graph", "--client", "10.0.0.7:2222"])
    config = json.loads(result.stdout)
    assert config["task"] == {"type": "chief", "index": 0}
    assert config["cluster"]["chief"] == ["10.0.0.7:2222"]
    g = manifests.cluster_config(manifests.render({"clusterName": "m", "worker": {"replicas": 2},
                                                   "ps": {"replicas": 1}, "mode": "in-graph"}, "m", "u"))[1]
    assert config["cluster"]["worker"] == [f"m-worker-{g}-0.m-worker.u.svc.cluster.local:2222",
                                           f"m-worker-{g}-1.m-worker.u.svc.cluster.local:2222"]


@pytest.mark.parametrize("args,message", [
    (["up", "--workers", "0", "--dry-run"], "--workers: must be at least 1"),
    (["up", "--workers", "-1", "--dry-run"], "--workers: must be at least 1"),
    (["up", "--workers", "2", "--ps", "1000", "--dry-run"], "--ps: must be between 0 and 100"),
    (["up", "--workers", "2", "--name", "My_Job", "--dry-run"], "--name: 'My_Job' is not a valid name"),
    (["up", "--workers", "2", "--name", "a" * 45], "use at most 44 characters"),
    (["up", "--workers", "100000", "--name", "a" * 44], "use at most 43 characters, or at most 10,000 workers"),
    (["up", "--workers", "100001"], "--workers: 100001 is over the limit of 100000"),
    (["up", "--workers", "2", "--script", "s3://bucket/t.py"], "--script: 's3://bucket/t.py' is not an http(s) URL"),
    (["up", "--workers", "2", "--set", "wrkers=3"], "additional properties 'wrkers' not allowed"),
    (["up", "--workers", "2", "--set", "mode=in-graph", "--ps", "0"], "needs parameter servers"),
    (["up", "--image", "bad image"], "--image: 'bad image' is not an image reference"),
    (["tfconfig", "m", "--workers", "2", "--task", "worker:2"], "worker:2 is not in this cluster"),
    (["tfconfig", "m", "--workers", "2", "--task", "boss:0"], "--task: 'boss:0' is not TYPE:INDEX"),
    (["tfconfig", "m", "--workers", "2", "--task", "evaluator:0"], "evaluator:0 is not in this cluster"),
    (["tfconfig", "m", "--workers", "2"], "give either --task TYPE:INDEX or --client HOST:PORT"),
    (["tfconfig", "m", "--workers", "2", "--chief", "--client", "h:1"], "has its own chief Job"),
    (["tfconfig", "m", "--workers", "2", "--client", "nohost"], "'nohost' is not HOST:PORT"),
    (["logs", "m", "-n", "a", "--tail", "-5"], "Invalid value for '--tail'"),
    # Refused before anything is made (issue #31): a cluster made first, then a failure, is half made.
    (["up", "--workers", "1", "--timeout", "-5"], "--timeout: must be a number of seconds above 0, got -5"),
    (["up", "--workers", "1", "--pip", "pandas; rm -rf /"], "--pip: 'pandas; rm -rf /' is not a requirement"),
    (["up", "--workers", "1", "--pip", "pandas @ https://x/p.whl"], "is not a requirement"),
    (["up", "--workers", "1", "--set-json", 'code.packages=["pandas; rm -rf /"]'],
     "code.packages.0: 'pandas; rm -rf /' is not a pip requirement"),
    (["up", "--workers", "2", "--set", "worker=3"],
     "worker: must be a map of settings, got 3 (an option sets worker.replicas"),
    (["up", "--workers", "2", "--set-json", "worker.env=[{"],
     "--set-json: 'worker.env=[{': the value of worker.env is not JSON (Expecting property name"),
    (["up", "--workers", "2", "--set-json", "worker.env"], "--set-json: 'worker.env' is not KEY=JSON"),
    (["up", "--workers", "2", "--set-json", 'worker.env=[],x'], "--set-json: 'worker.env=[],x' is not KEY=JSON"),
    (["tfconfig", "m", "--workers", "2", "--client", "host:99999"], "'host:99999' is not HOST:PORT (a port from 1"),
    (["tfconfig", "m", "--workers", "2", "--client", "host:0"], "is not HOST:PORT"),
    (["user", "add", "alice", "--timeout", "-5"], "--timeout: must be a number of seconds above 0"),
    (["user", "add", "alice", "--priority-class", "system-node-critical"], "one of Kubernetes' own classes"),
    (["user", "add", "alice", "--quota", "count/secrets"], "--quota: 'count/secrets' is not KEY=N"),
    (["user", "add", "alice", "--metrics-from", "Mon"], "--metrics-from: 'Mon' is not a valid namespace"),
])
def test_bad_input_is_one_clear_line_and_exit_2_before_any_cluster_access(args, message):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "no reachable Kubernetes cluster" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_up_without_a_cluster_says_how_to_start_one():
    result = runner.invoke(app, ["up", "--workers", "1", "--name", "m"])
    assert result.exit_code == 3
    assert "no reachable Kubernetes cluster" in result.stderr and "tfhelm cluster up" in result.stderr


def test_a_checkout_has_the_development_cluster_command():
    """`make install` registers `tfhelm cluster` (tfhelm_dev, entry point `tfhelm.commands`):
    listed and run like tfhelm's own; a name nobody registered is still a usage error."""
    listed = runner.invoke(app, ["--help"])
    assert listed.exit_code == 0 and re.search(r"^\W*cluster\s", listed.stdout, re.M), listed.output
    assert "The local Kubernetes" in runner.invoke(app, ["cluster", "--help"]).stdout
    unknown = runner.invoke(app, ["clusters", "status"])
    assert unknown.exit_code == 2 and "No such command 'clusters'" in unknown.stderr, unknown.output


def test_a_command_group_that_does_not_load_takes_no_other_command_down(monkeypatch):
    """A package registered a group whose code is gone: naming it says so in one line (exit 2);
    `--help` and every other command work as before."""
    import importlib.metadata

    from tfhelm import console

    broken = importlib.metadata.EntryPoint("broken", "no_such_module_here:app", console.PLUGINS)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [broken] if group == console.PLUGINS else [])
    console._plugins.cache_clear()
    try:
        result = runner.invoke(app, ["broken", "status"])
        assert result.exit_code == 2, result.output
        assert "`tfhelm broken` comes from no_such_module_here:app, which does not load: ModuleNotFoundError" \
            in result.stderr
        listed = runner.invoke(app, ["--help"])
        assert listed.exit_code == 0 and "broken" not in listed.stdout
        assert not re.search(r"^\W*cluster\s", listed.stdout, re.M)  # nor the checkout's, found the same way
        assert runner.invoke(app, ["up", "--workers", "1", "--name", "demo", "--dry-run"]).exit_code == 0
    finally:
        console._plugins.cache_clear()
