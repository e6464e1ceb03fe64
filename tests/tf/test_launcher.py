"""The task launcher without TensorFlow: TF_CONFIG resolution, script mode, standalone use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfhelm import launcher, spec

LAUNCHER = Path(launcher.__file__)


def cluster(workers=2, ps=1, chief=False, evaluator=False):
    return spec.cluster_spec("demo", "team-a", spec.Shape(workers, ps, chief, evaluator))


def test_inline_tf_config_wins():
    config = spec.tf_config(cluster(), "worker", 1)
    env = {"TF_CONFIG": json.dumps(config), "TFHELM_TASK_TYPE": "ps", "TFHELM_TASK_INDEX": "0"}
    assert launcher.resolve_tf_config(env) == config


def compact(workers=2, ps=1, chief=False):
    return spec.compact_spec("demo", "team-a", spec.Shape(workers, ps, chief), generation="0a1b2c")


@pytest.mark.parametrize("form", ["compact", "lists"])
def test_composes_tf_config_from_the_spec_file(tmp_path, form):
    """The chart's spec (pattern + count) and explicit host lists (local runs) alike."""
    c = spec.cluster_spec("demo", "team-a", spec.Shape(2, 1), generation="0a1b2c")
    (tmp_path / "cluster-spec.json").write_text(spec.dumps(compact() if form == "compact" else c))
    env = {"TFHELM_CLUSTER_SPEC_FILE": str(tmp_path / "cluster-spec.json"),
           "TFHELM_TASK_TYPE": "worker", "TFHELM_TASK_INDEX": "1"}
    config = launcher.resolve_tf_config(env)
    assert config == spec.tf_config(c, "worker", 1)
    assert config["cluster"]["worker"] == ["demo-worker-0a1b2c-0.demo-worker.team-a.svc:2222",
                                           "demo-worker-0a1b2c-1.demo-worker.team-a.svc:2222"]
    assert json.loads(env["TF_CONFIG"]) == config  # exported for the libraries in-process
    assert env["TF_CONFIG"] == spec.dumps(config)


@pytest.mark.parametrize("entry", [{"count": 2}, {"count": -1, "host": "h-{index}:1"},
                                   {"count": 2, "host": "h:1"}, {"count": "2", "host": "h-{index}:1"},
                                   {"count": 2, "host": "h-{index}-{index}:1"}, "h:1"])
def test_a_bad_spec_entry_is_named(entry):
    with pytest.raises(launcher.LaunchError, match="cluster spec role 'worker': expected a list"):
        launcher.expand_cluster({"worker": entry})


@pytest.mark.parametrize("env, message", [
    ({}, "neither TF_CONFIG nor TFHELM_CLUSTER_SPEC_FILE"),
    ({"TF_CONFIG": "{nope"}, "not valid JSON"),
    ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}'},
     "worker:1 is not in the cluster"),
    ({"TF_CONFIG": '{"cluster": {"master": ["a:1"]}, "task": {"type": "master", "index": 0}}'},
     "unknown task type 'master'"),
    ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "0"}}'},
     "not an integer"),
    ({"TFHELM_CLUSTER_SPEC_FILE": "/nonexistent/cluster-spec.json", "TFHELM_TASK_TYPE": "worker",
      "TFHELM_TASK_INDEX": "0"}, "cannot read the cluster spec"),
])
def test_bad_environments_are_named(env, message):
    with pytest.raises(launcher.LaunchError, match=message):
        launcher.resolve_tf_config(dict(env))


def test_evaluator_may_stand_outside_the_training_cluster():
    config = {"cluster": cluster(), "task": {"type": "evaluator", "index": 0}}
    assert launcher.resolve_tf_config({"TF_CONFIG": json.dumps(config)}) == config


def test_training_cluster_drops_the_evaluator():
    c = cluster(chief=True, evaluator=True)
    assert set(launcher.training_cluster(c)) == {"chief", "worker", "ps"}


def run_launcher(args, env, cwd=None, module=False):
    cmd = [sys.executable, "-m", "tfhelm.launcher"] if module else [sys.executable, str(LAUNCHER)]
    return subprocess.run([*cmd, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_script_mode_from_a_huge_cluster_spec(tmp_path):
    """100,000 workers: the spec file is a few hundred bytes, TF_CONFIG far over Linux's
    128 KiB per environment string; the launcher composes it and runs the script in-process."""
    (tmp_path / "cluster-spec.json").write_text(spec.dumps(compact(workers=100_000, ps=4, chief=True)))
    assert (tmp_path / "cluster-spec.json").stat().st_size < 512
    script = tmp_path / "train.py"
    script.write_text(
        "import json, os, sys\n"
        "c = json.loads(os.environ['TF_CONFIG'])\n"
        "print(json.dumps([len(os.environ['TF_CONFIG']), c['cluster']['worker'][-1], c['task'],"
        " sys.argv[1:], __name__]))\n"
        "sys.exit(int(sys.argv[1]))\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(TFHELM_CLUSTER_SPEC_FILE=str(tmp_path / "cluster-spec.json"),
               TFHELM_TASK_TYPE="worker", TFHELM_TASK_INDEX="99999")
    # Standalone file, no tfhelm on the path: what a stock TensorFlow image has.
    done = run_launcher(["script", str(script), "7", "--flag"], env, cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    size, last, task, args, name = json.loads(done.stdout)
    assert size > 128 * 1024 and last == "demo-worker-0a1b2c-99999.demo-worker.team-a.svc:2222"
    assert task == {"type": "worker", "index": 99999}
    assert args == ["7", "--flag"] and name == "__main__"


def spec_env(tmp_path, workers=2, task="worker", index="1"):
    (tmp_path / "cluster-spec.json").write_text(spec.dumps(compact(workers=workers)))
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(TFHELM_CLUSTER_SPEC_FILE=str(tmp_path / "cluster-spec.json"),
               TFHELM_TASK_TYPE=task, TFHELM_TASK_INDEX=index)
    return env


def test_exec_mode_gives_the_users_command_tf_config_and_its_arguments(tmp_path):
    """A role's own `command` (the chart runs it as `launcher.py exec -- CMD ARGS`)."""
    env = spec_env(tmp_path)
    probe = "import json, os, sys; print(json.dumps([os.environ['TF_CONFIG'], sys.argv[1:]]))"
    done = run_launcher(["exec", "--", "python3", "-c", probe, "a b", "--x"], env)
    assert done.returncode == 0, done.stderr
    tf_config, args = json.loads(done.stdout)
    assert tf_config == spec.dumps(spec.tf_config(launcher.expand_cluster(compact()), "worker", 1))
    assert args == ["a b", "--x"]
    status = run_launcher(["exec", "sh", "-c", "exit 5"], env)  # `--` is optional
    assert status.returncode == 5


def test_exec_mode_refuses_a_tf_config_over_the_environment_string_limit(tmp_path):
    env = spec_env(tmp_path, workers=3_000)
    done = run_launcher(["exec", "--", "true"], env)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tfhelm-launcher: error: TF_CONFIG is ")
    assert "over Linux's limit of 131072 bytes for one environment string" in line
    assert "leave the role's `command` unset" in line


def test_exec_mode_names_a_missing_command(tmp_path):
    done = run_launcher(["exec", "--", "no-such-command-here"], spec_env(tmp_path))
    assert done.returncode == 127
    assert "cannot run 'no-such-command-here'" in done.stderr


def test_tfconfig_mode_prints_the_tasks_tf_config(tmp_path):
    """`kubectl exec POD -- python3 /etc/tfhelm/launcher.py tfconfig`."""
    done = run_launcher(["tfconfig"], spec_env(tmp_path, task="ps", index="0"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == spec.dumps(spec.tf_config(launcher.expand_cluster(compact()), "ps", 0)) + "\n"


def test_launcher_imports_only_the_standard_library():
    """Stock TensorFlow images have no tfhelm and no third-party extras beyond TF."""
    code = ("import sys, runpy; before = set(sys.modules); "
            f"runpy.run_path({str(LAUNCHER)!r}, run_name='not_main'); "
            "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
            "stdlib = set(sys.stdlib_module_names) | {'_io', 'encodings'}; "
            "print(sorted(m for m in new if m not in stdlib and not m.startswith('_')))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("exit_stmt, code, stderr", [
    ("pass", 0, ""),
    ("sys.exit()", 0, ""),
    ("sys.exit(4)", 4, ""),
    ("sys.exit('bad input')", 1, "bad input"),
    ("raise RuntimeError('boom')", 1, "RuntimeError: boom"),
])
def test_script_exit_status_propagates(tmp_path, exit_stmt, code, stderr):
    script = tmp_path / "s.py"
    script.write_text(f"import sys\n{exit_stmt}\n")
    env = {**os.environ, "TF_CONFIG": spec.dumps(spec.tf_config(cluster(), "worker", 0))}
    done = run_launcher(["script", str(script)], env, module=True)
    assert done.returncode == code
    assert stderr in done.stderr


@pytest.mark.parametrize("args", [[], ["serve"], ["script"], ["server", "extra"], ["exec"],
                                  ["exec", "--"], ["tfconfig", "extra"]])
def test_usage_errors_exit_2(args):
    env = {**os.environ, "TF_CONFIG": spec.dumps(spec.tf_config(cluster(), "worker", 0))}
    done = run_launcher(args, env)
    assert done.returncode == 2
    assert "usage" in done.stderr


def test_bad_tf_config_is_one_clear_line(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('never')\n")
    env = {**os.environ, "TF_CONFIG": '{"cluster": {}, "task": {"type": "worker", "index": 0}}'}
    done = run_launcher(["script", str(script)], env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "tfhelm-launcher: error: TF_CONFIG: task worker:0 is not in the cluster ()"]
    assert "never" not in done.stdout
