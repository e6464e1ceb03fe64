"""The task launcher without TensorFlow: TF_CONFIG resolution, script mode, standalone use."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tfhelm.cluster import spec
from tfhelm.cluster.localrun import LAUNCHER  # the chart's copy, with its modules beside it
from tfhelm.pod import events, keras, packages, supervise, tfconfig


def cluster(workers=2, ps=1, chief=False, evaluator=False):
    return spec.cluster_spec("demo", "team-a", spec.Shape(workers, ps, chief, evaluator))


def test_inline_tf_config_wins():
    config = spec.tf_config(cluster(), "worker", 1)
    env = {"TF_CONFIG": json.dumps(config), "TFHELM_TASK_TYPE": "ps", "TFHELM_TASK_INDEX": "0"}
    assert tfconfig.resolve_tf_config(env) == config


def compact(workers=2, ps=1, chief=False):
    return spec.compact_spec("demo", "team-a", spec.Shape(workers, ps, chief), generation="0a1b2c")


@pytest.mark.parametrize("form", ["compact", "lists"])
def test_composes_tf_config_from_the_spec_file(tmp_path, form):
    """The chart's spec (pattern + count) and explicit host lists (local runs) alike."""
    c = spec.cluster_spec("demo", "team-a", spec.Shape(2, 1), generation="0a1b2c")
    (tmp_path / "cluster-spec.json").write_text(spec.dumps(compact() if form == "compact" else c))
    env = {"TFHELM_CLUSTER_SPEC_FILE": str(tmp_path / "cluster-spec.json"),
           "TFHELM_TASK_TYPE": "worker", "TFHELM_TASK_INDEX": "1"}
    config = tfconfig.resolve_tf_config(env)
    assert config == spec.tf_config(c, "worker", 1)
    assert config["cluster"]["worker"] == ["demo-worker-0a1b2c-0.demo-worker.team-a.svc:2222",
                                           "demo-worker-0a1b2c-1.demo-worker.team-a.svc:2222"]
    assert json.loads(env["TF_CONFIG"]) == config  # exported for the libraries in-process
    assert env["TF_CONFIG"] == spec.dumps(config)


@pytest.mark.parametrize("entry", [{"count": 2}, {"count": -1, "host": "h-{index}:1"},
                                   {"count": 2, "host": "h:1"}, {"count": "2", "host": "h-{index}:1"},
                                   {"count": 2, "host": "h-{index}-{index}:1"}, "h:1"])
def test_a_bad_spec_entry_is_named(entry):
    with pytest.raises(tfconfig.LaunchError, match="cluster spec role 'worker': expected a list"):
        tfconfig.expand_cluster({"worker": entry})


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
    with pytest.raises(tfconfig.LaunchError, match=message):
        tfconfig.resolve_tf_config(dict(env))


def test_evaluator_may_stand_outside_the_training_cluster():
    config = {"cluster": cluster(), "task": {"type": "evaluator", "index": 0}}
    assert tfconfig.resolve_tf_config({"TF_CONFIG": json.dumps(config)}) == config


def test_training_cluster_drops_the_evaluator():
    c = cluster(chief=True, evaluator=True)
    assert set(tfconfig.training_cluster(c)) == {"chief", "worker", "ps"}


def run_launcher(args, env, cwd=None, module=False):
    cmd = [sys.executable, "-m", "tfhelm.pod.launcher"] if module else [sys.executable, str(LAUNCHER)]
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
    assert tf_config == spec.dumps(spec.tf_config(tfconfig.expand_cluster(compact()), "worker", 1))
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
    assert done.stdout == spec.dumps(spec.tf_config(tfconfig.expand_cluster(compact()), "ps", 0)) + "\n"


def test_launcher_imports_only_the_standard_library(tmp_path):
    """Stock TensorFlow images have no tfhelm and no third-party extras beyond TF: the chart's
    copy runs with -I (no site-packages, no tfhelm) on its own modules and the standard library."""
    code = ("import sys, runpy; before = set(sys.modules); "
            f"sys.argv = [{str(LAUNCHER)!r}, 'tfconfig']\n"
            f"try: runpy.run_path({str(LAUNCHER)!r}, run_name='__main__')\n"
            "except SystemExit as e: assert e.code == 0, e.code\n"
            "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
            "stdlib = set(sys.stdlib_module_names) | {'_io', 'encodings', 'tfhelm'}; "
            "print(sorted(m for m in new if m not in stdlib and not m.startswith('_')), "
            "sorted(m.__file__ for n, m in sys.modules.items() if n.startswith('tfhelm.') and m.__file__))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          env=spec_env(tmp_path), timeout=60)
    assert done.returncode == 0, done.stderr
    outside, files = done.stdout.strip().splitlines()[-1].split("] ", 1)
    assert outside == "[" and str(LAUNCHER.parent) in files and "site-packages" not in files


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


# --- stopping, failing, and saying why -------------------------------------------------------

def launch_as_pid_1(args, env):
    """The launcher as PID 1 of a new PID namespace, as in a container. Its host PID is
    returned too: signals from outside reach a namespace's PID 1 only for the handlers it
    installed, exactly as the kubelet's SIGTERM reaches a container's PID 1."""
    proc = subprocess.Popen(["unshare", "--pid", "--fork", sys.executable, str(LAUNCHER), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n", proc.stderr.read()  # the task runs
    (pid,) = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    nspid = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("NSpid:"))
    assert nspid.split()[-1] == "1", nspid
    return proc, int(pid)


@pytest.mark.skipif(os.geteuid() != 0, reason="a new PID namespace needs root (as the real node does)")
@pytest.mark.parametrize("mode", ["script", "exec"])
def test_as_pid_1_sigterm_stops_a_task_that_installs_no_handler(tmp_path, mode):
    """A pod deletion, an upgrade or a reap sends SIGTERM to PID 1: the launcher passes it
    on, so the task stops now instead of at the end of the grace period (exit 143, not 137)."""
    script = tmp_path / "train.py"
    script.write_text("import time\nprint('ready', flush=True)\ntime.sleep(600)\n")
    args = (["script", str(script)] if mode == "script"
            else ["exec", "--", "sh", "-c", "echo ready; exec sleep 600"])
    proc, pid = launch_as_pid_1(args, spec_env(tmp_path))
    os.kill(pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM  # the timeout is a safety net only
    assert "tfhelm-launcher: SIGTERM: stopping the task" in proc.stderr.read()


@pytest.mark.skipif(os.geteuid() != 0, reason="a new PID namespace needs root (as the real node does)")
@pytest.mark.parametrize("mode", ["script", "exec"])
def test_sigterm_lets_a_script_that_imports_tfhelm_preemption_save_and_leave_143(tmp_path, mode):
    """The helper the chart ships beside the launcher is importable by the script (and by a
    role's own Python command): SIGTERM, passed on by PID 1, only takes note; the script
    finishes its step, saves, and leaves as SIGTERM would have (143: stopped, not done)."""
    script, saved = tmp_path / "train.py", tmp_path / "saved"
    script.write_text(
        "import time, tfhelm_preemption as preemption\n"
        "print('ready', flush=True)\n"
        "step = 0\n"
        "while not preemption.requested():\n"
        "    step += 1\n"
        "    time.sleep(0.01)\n"
        f"open({str(saved)!r}, 'w').write(str(step))\n"
        "preemption.leave()\n")
    args = ["script", str(script)] if mode == "script" else ["exec", "--", sys.executable, str(script)]
    proc, pid = launch_as_pid_1(args, spec_env(tmp_path))
    os.kill(pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert int(saved.read_text()) > 0
    assert "tfhelm_preemption: SIGTERM: saving at the next step" in proc.stderr.read()


def test_a_task_whose_index_another_pod_took_over_stops_at_once(tmp_path):
    """The fence (tfhelm/pod/fence.py): a task claims its index on the shared logs volume; when
    another pod's claim replaces it (this pod was replaced while its node was away), the
    launcher kills the script and leaves, whatever the script was doing."""
    script = tmp_path / "train.py"
    script.write_text("import time\nprint('ready', flush=True)\ntime.sleep(600)\n")
    env = {**spec_env(tmp_path), "TFHELM_POD_UID": "uid-old", "TFHELM_LOG_DIR": str(tmp_path / "log"),
           "TFHELM_TERMINATION_LOG": str(tmp_path / "termination-log")}
    proc = subprocess.Popen([sys.executable, str(LAUNCHER), "script", str(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    claim = tmp_path / "log" / ".tfhelm" / "tasks" / "worker-1"
    assert claim.read_text() == "uid-old\n"
    (tmp_path / "new").write_text("uid-new\n")
    os.replace(tmp_path / "new", claim)  # the replacement starts: its launcher claims the task
    assert proc.wait(timeout=60) == 75  # the timeout is a safety net only
    assert "pod uid-new runs this task now" in proc.stderr.read()
    assert (tmp_path / "termination-log").read_text() == "replaced by pod uid-new\n"


def failing(tmp_path, body: str, **env):
    """Run a script that fails; returns (exit code, stderr, termination message)."""
    script, message = tmp_path / "s.py", tmp_path / "termination-log"
    script.write_text(body)
    environ = {**spec_env(tmp_path), "TFHELM_TERMINATION_LOG": str(message), **env}
    done = run_launcher(["script", str(script)], environ)
    return done.returncode, done.stderr, message.read_text() if message.exists() else None


def test_an_error_of_the_script_fails_with_its_last_traceback_line_as_the_reason(tmp_path):
    code, stderr, message = failing(tmp_path, "import no_such_module_here\n")
    assert code == 1
    assert "Traceback (most recent call last)" in stderr  # the log keeps the whole traceback
    assert message == "ModuleNotFoundError: No module named 'no_such_module_here'\n"


def test_a_tensorflow_error_a_restart_can_cure_exits_75_to_be_retried(tmp_path):
    """A peer gone (TensorFlow's UnavailableError, here its look-alike): exit 75, which the
    chart's podFailurePolicy retries; the reason is TensorFlow's error proper."""
    body = ('class UnavailableError(Exception): pass\n'
            'raise UnavailableError("Graph execution error:\\n\\nDetected at node X defined at:\\n'
            '  File \\"t.py\\", line 3\\n\\nCollective ops is aborted by: Socket closed\\n'
            '\\t [[{{node X}}]]")\n')
    code, stderr, message = failing(tmp_path, body)
    assert code == supervise.EXIT_RETRY == 75
    assert message == ("UnavailableError: Graph execution error: Collective ops is aborted by: "
                       "Socket closed (retried)\n")
    assert "UnavailableError is retried" in stderr
    # Which errors are retried is the chart's setting (failurePolicy.retryErrors).
    assert failing(tmp_path, body, TFHELM_RETRY_ERRORS="AbortedError")[0] == 1


def test_a_retried_error_wrapped_by_tensorflows_coordinator_exits_75(tmp_path):
    """ClusterCoordinator raises a failed step's error wrapped (ClosureInputError keeps it as
    `original_exception`); `raise ... from` keeps it as `__cause__`: both are retried."""
    body = ('class UnavailableError(Exception): pass\n'
            'class ClosureInputError(Exception):\n'
            '    def __init__(self, e):\n'
            '        self.original_exception = e\n'
            '        super().__init__(f"Input has an error, the original exception is {e!r}")\n'
            'raise ClosureInputError(UnavailableError("Socket closed"))\n')
    code, _, message = failing(tmp_path, body)
    assert code == supervise.EXIT_RETRY
    assert message.startswith("ClosureInputError: Input has an error") and message.endswith("(retried)\n")
    cause = 'class UnavailableError(Exception): pass\nraise RuntimeError("step failed") from UnavailableError("gone")\n'
    assert failing(tmp_path, cause)[0] == supervise.EXIT_RETRY
    assert failing(tmp_path, 'raise RuntimeError("step failed") from ValueError("bad")\n')[0] == 1


def test_a_killed_script_exits_137_and_says_so(tmp_path):
    """SIGKILL (the kernel's out-of-memory killer picks the script, the biggest process)."""
    code, _, message = failing(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert code == 137
    assert message == "killed by SIGKILL (out of memory, or killed)\n"


def test_a_plain_exit_status_leaves_the_reason_to_the_log(tmp_path):
    """sys.exit(3) after printing its own error: Kubernetes then takes the log's last lines
    (terminationMessagePolicy FallbackToLogsOnError)."""
    code, _, message = failing(tmp_path, "import sys\nprint('bad data', file=sys.stderr)\nsys.exit(3)\n")
    assert (code, message) == (3, None)


def test_keras_2_without_tf_keras_is_one_line_before_the_script_starts(tmp_path, monkeypatch):
    real = keras.importlib.util.find_spec
    monkeypatch.setattr(keras.importlib.util, "find_spec",
                        lambda name, *a: None if name == "tf_keras" else real(name, *a))
    with pytest.raises(tfconfig.LaunchError, match=r"Keras 2 is asked for \(TF_USE_LEGACY_KERAS=1.*"
                       r"this image has no tf-keras: use an image with tf-keras==2\.21\.\*"):
        keras.check_keras({"TF_USE_LEGACY_KERAS": "1"})
    keras.check_keras({"TF_USE_LEGACY_KERAS": "0"})  # Keras 3
    keras.check_keras({})  # the script decides


def test_a_launch_error_is_the_termination_message_too(tmp_path):
    """What the launcher refuses (here Keras 2 on an image without tf-keras) is the task's
    one-line reason, exit 2: a failure no retry can cure."""
    env = {**spec_env(tmp_path), "TF_USE_LEGACY_KERAS": "1",
           "TFHELM_TERMINATION_LOG": str(tmp_path / "termination-log")}
    script = tmp_path / "s.py"
    script.write_text("print('never')\n")
    # -I: without this venv's site-packages, hence without any tf-keras it may hold.
    done = subprocess.run([sys.executable, "-I", str(LAUNCHER), "script", str(script)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "never" not in done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tfhelm-launcher: error: Keras 2 is asked for")
    assert (tmp_path / "termination-log").read_text() == line.removeprefix("tfhelm-launcher: error: ") + "\n"


# --- a run's extra packages ------------------------------------------------------------------

SYSTEM_PYTHON = "/usr/bin/python3"  # like the images' Python: no virtualenv, so `pip --user` works


def system_pip() -> bool:
    return subprocess.run([SYSTEM_PYTHON, "-m", "pip", "--version"], capture_output=True).returncode == 0


def install_packages(tmp_path, run: str, pod: str, requirement: str = "tfhelm_probe==1.0"):
    """One task's install-packages: SHARED on the run's data volume, PRIVATE in its pod."""
    shared = tmp_path / "data" / ".tfhelm" / "packages" / "0123abcd" / run
    cmd = [SYSTEM_PYTHON, str(LAUNCHER), "packages", str(shared), str(tmp_path / pod / "packages"), "--no-index",
           "--find-links", str(tmp_path / "wheels"), "--", requirement]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))} | {
        "HOME": str(tmp_path), "TFHELM_TERMINATION_LOG": str(tmp_path / f"{pod}.termination-log")}
    return shared, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_probe(tmp_path, pod: str):
    script = tmp_path / "train.py"
    script.write_text("import tfhelm_probe\nprint(tfhelm_probe.ANSWER)\n")
    return subprocess.run([SYSTEM_PYTHON, str(LAUNCHER), "script", str(script)],
                          env={**spec_env(tmp_path), "PYTHONUSERBASE": str(tmp_path / pod / "packages")},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not system_pip(), reason="needs a system Python with pip, as the TensorFlow images have")
def test_packages_are_installed_once_per_run_and_every_task_uses_a_checked_copy(tmp_path):
    from tests.helpers.wheels import make_wheel

    make_wheel(tmp_path / "wheels", "tfhelm_probe", "1.0", "ANSWER = 42\n")
    # Two tasks start at once: the lock lets one install; the other finds it done.
    started = [install_packages(tmp_path, "run-1", pod) for pod in ("pod-a", "pod-b")]
    logs = [t.communicate(timeout=300)[1] for _, t in started]
    assert [t.returncode for _, t in started] == [0, 0], logs
    assert sum("installing tfhelm_probe==1.0" in log for log in logs) == 1, logs
    assert sum("packages already installed" in log for log in logs) == 1, logs
    assert all("files checked and copied into" in log for log in logs), logs
    for pod in ("pod-a", "pod-b"):  # each task imports its own copy
        done = run_probe(tmp_path, pod)
        assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
    # A later run installs afresh, and the earlier run's install goes.
    later, task = install_packages(tmp_path, "run-2", "pod-c")
    assert task.wait(300) == 0 and "installing tfhelm_probe==1.0" in task.stderr.read()
    assert later.is_dir() and not (later.parent / "run-1").exists()


@pytest.mark.skipif(not system_pip(), reason="needs a system Python with pip, as the TensorFlow images have")
@pytest.mark.parametrize("poison", ["changed", "added", "removed"])
def test_what_else_writes_the_data_volume_cannot_change_what_a_run_imports(tmp_path, poison):
    """Anything that can write the data volume (any pod mounting it, a package a script
    installed) changes the shared install after pip wrote it: the next task's check refuses
    it, in one line, and nothing of it reaches the task's copy."""
    from tests.helpers.wheels import make_wheel

    make_wheel(tmp_path / "wheels", "tfhelm_probe", "1.0", "ANSWER = 42\n")
    shared, first = install_packages(tmp_path, "run-1", "pod-a")
    assert first.wait(300) == 0, first.stderr.read()
    module = next(p for p in shared.rglob("*.py") if "tfhelm_probe" in str(p.relative_to(shared)))
    if poison == "changed":
        module.write_text("ANSWER = 'poisoned'\n")
    elif poison == "added":
        (module.parent / "sitecustomize.py").write_text("print('poisoned')\n")
    else:
        module.unlink()
    _, second = install_packages(tmp_path, "run-1", "pod-b")
    assert second.wait(300) == 1
    reason = (tmp_path / "pod-b.termination-log").read_text()
    assert reason.startswith(f"the installed packages in {shared} were changed after pip wrote them: "), reason
    assert {"changed": "differs", "added": "was added", "removed": "is gone"}[poison] in reason
    assert "poisoned" not in run_probe(tmp_path, "pod-b").stdout


@pytest.mark.skipif(not system_pip(), reason="needs a system Python with pip, as the TensorFlow images have")
def test_a_package_that_cannot_be_installed_is_the_tasks_one_line_reason(tmp_path):
    target = tmp_path / "packages" / "0123abcd" / "run-1"
    (tmp_path / "wheels").mkdir()
    env = {**os.environ, "HOME": str(tmp_path), "TFHELM_TERMINATION_LOG": str(tmp_path / "termination-log")}
    done = subprocess.run([SYSTEM_PYTHON, str(LAUNCHER), "packages", str(target), str(tmp_path / "private"), "--no-index",
                           "--find-links", str(tmp_path / "wheels"), "--", "nosuchpackage==9.9"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1  # not in failurePolicy.retryExitCodes: the task fails at once
    assert (tmp_path / "termination-log").read_text() == (
        "pip could not install nosuchpackage==9.9: ERROR: Could not find a version that satisfies the "
        "requirement nosuchpackage==9.9 (from versions: none)\n")
    assert not (target / packages.PACKAGES_MARKER).exists()  # the next attempt would try again


@pytest.mark.needs_tf
def test_progress_reads_what_tf_summary_writes(tmp_path):
    """Event files written by TensorFlow's own summary writer (TF2 tensors, a v1 simple_value),
    read by the launcher's standard-library reader: the newest step and every scalar."""
    code = f"""
import importlib.util
import tensorflow as tf
from tensorflow.core.framework import summary_pb2
HAVE_TB = importlib.util.find_spec("tensorboard") is not None
scalars = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
w = tf.summary.create_file_writer({str(tmp_path / "train")!r})
with w.as_default():
    for step in range(1, 6):
        # What tf.summary.scalar writes (TF 2.21 has it only with the tensorboard package).
        tf.summary.write("loss", tf.constant(1.0 / step, tf.float32), step=step, metadata=scalars)
        tf.summary.write("steps_per_sec", tf.constant(2.5, tf.float64), step=step, metadata=scalars)
        tf.summary.write("weights", tf.random.normal([10, 3]), step=step)  # a histogram's shape
        tf.summary.write("note", tf.constant("not a scalar"), step=step)
        if HAVE_TB:
            tf.summary.scalar("epoch_loss", 0.5, step=step)
w.flush()
with tf.compat.v1.Graph().as_default():
    v1 = tf.compat.v1.summary.FileWriter({str(tmp_path / "eval")!r})
    v1.add_summary(tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag="accuracy", simple_value=0.75)]), 7)
    v1.flush()
print(HAVE_TB)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr
    p = events.Progress(str(tmp_path))
    p.update()
    assert p.runs["train"]["step"] == 5
    expected = {"loss": pytest.approx(0.2), "steps_per_sec": 2.5}
    if result.stdout.strip() == "True":
        expected["epoch_loss"] = 0.5
    assert {t: v for t, (_, v) in p.runs["train"]["scalars"].items()} == expected
    assert p.runs["eval"]["step"] == 7 and p.runs["eval"]["scalars"]["accuracy"][1] == 0.75
