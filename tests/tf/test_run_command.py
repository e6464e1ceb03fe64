"""`tfhelm run --local` end to end: the command, real TensorFlow, and Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import typer
from typer.testing import CliRunner

from tfhelm.commands.run import run as run_command

from .helpers import (EXAMPLES, ROOT, alive, children, events, latest_checkpoint_step, metrics,
                      processes_with_env)


def tfhelm_app() -> typer.Typer:
    """The real CLI once it registers `run`; until then the command on a tiny app."""
    from tfhelm import cli

    if any(c.name == "run" for c in cli.app.registered_commands):
        return cli.app
    app = typer.Typer()
    app.command("run")(run_command)
    app.command("noop")(lambda: None)  # keep `run` a sub-command, as in the real CLI
    return app


def invoke(*args: str):
    return CliRunner().invoke(tfhelm_app(), ["run", *args], env={"TF_CPP_MIN_LOG_LEVEL": "2"})


def test_without_local_it_points_to_tfhelm_up(tmp_path):
    result = invoke(str(EXAMPLES / "collective.py"))
    assert result.exit_code == 2
    assert "tfhelm up" in result.output
    assert not (tmp_path / ".tfhelm").exists()


@pytest.mark.parametrize("args, message", [
    (["--local", "--in-graph", "--ps", "1"], "--in-graph needs --chief"),
    (["--local", "--workers", "0"], "--workers: must be at least 1"),
    (["--local", "--name", "Bad_Name"], "--name: 'Bad_Name' is not a valid name"),
])
def test_usage_errors(args, message):
    result = invoke(*args, str(EXAMPLES / "collective.py"))
    assert result.exit_code == 2
    assert message in result.output


def test_missing_script():
    result = invoke("--local", "no/such/train.py")
    assert result.exit_code == 2 and "no/such/train.py is not a file" in result.output


@pytest.mark.needs_tf
def test_between_graph_example(tmp_path):
    result = invoke("--local", "--ps", "1", "--workers", "1", "--dir", str(tmp_path),
                    str(EXAMPLES / "ps_between_graph.py"), "--",
                    "--steps", "30", "--checkpoint-every", "10")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "[ps-0]" in out and "serving on 127.0.0.1:" in out  # prefixed, streamed logs
    assert "[worker-0]" in out and "done at global step" in out
    assert "stopping on SIGTERM" in out  # the PS, once the worker was done
    assert "training finished" in out
    assert latest_checkpoint_step(tmp_path / "log" / "checkpoints") >= 30
    assert events(metrics(tmp_path / "log", "worker-0"), "step")


@pytest.mark.needs_tf
def test_in_graph_example_and_rerun_resumes(tmp_path):
    args = ["--local", "--chief", "--ps", "1", "--workers", "1", "--in-graph", "--name", "ig",
            "--dir", str(tmp_path), str(EXAMPLES / "ps_in_graph.py"), "--",
            "--steps", "20", "--checkpoint-every", "10"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "[worker-0]" in result.output and "serving on" in result.output
    assert "trained steps 0..20" in result.output
    assert latest_checkpoint_step(tmp_path / "log" / "checkpoints") == 20
    # Again, with more steps: it carries on from the checkpoint.
    result = invoke(*args[:-4], "--steps", "30", "--checkpoint-every", "10")
    assert result.exit_code == 0, result.output
    assert "trained steps 20..30" in result.output


def test_fresh_forgets_logs_and_checkpoints_and_exit_status_is_the_trainings(tmp_path):
    """With a script that needs no TensorFlow (between-graph workers only run the script)."""
    (tmp_path / "log" / "checkpoints").mkdir(parents=True)
    (tmp_path / "log" / "checkpoints" / "checkpoint").write_text("old")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep").write_text("data stays")
    script = tmp_path / "train.py"
    # Worker 1 fails only once worker 0 has printed: its failure stops worker 0.
    script.write_text("import os, pathlib, sys, time\n"
                      "ckpt = os.environ['TFHELM_CHECKPOINT_DIR']\n"
                      "print('checkpoints:', sorted(os.listdir(ckpt)), flush=True)\n"
                      "i = int(os.environ['TFHELM_TASK_INDEX'])\n"
                      "said = pathlib.Path(os.environ['TFHELM_DATA_DIR'], 'worker-0-said')\n"
                      "if i == 0: said.touch()\n"
                      "while i and sys.argv[1] == '0' and not said.exists(): time.sleep(0.05)\n"
                      "sys.exit(i + int(sys.argv[1]))\n")
    result = invoke("--local", "--workers", "2", "--fresh", "--dir", str(tmp_path), str(script),
                    "--", "0")
    assert result.output.count("checkpoints: []") == 2
    assert (tmp_path / "data" / "keep").exists()
    # worker-1 exits 1: the run fails with the training's status.
    assert result.exit_code == 1
    assert "training failed: worker-1 (exit status 1)" in result.output
    result = invoke("--local", "--workers", "1", "--dir", str(tmp_path), str(script), "--", "5")
    assert result.exit_code == 5


@pytest.mark.needs_tf
def test_ctrl_c_stops_everything(tmp_path):
    """SIGINT to `tfhelm run --local` (what Ctrl-C sends): every task goes, exit 130."""
    app = ("import sys, typer; from tfhelm.commands.run import run; "
           "app = typer.Typer(); app.command('run')(run); app.command('noop')(lambda: None); "
           "sys.argv[0] = 'tfhelm'; app()")
    proc = subprocess.Popen(
        [sys.executable, "-c", app, "run", "--local", "--ps", "1", "--workers", "1",
         "--dir", str(tmp_path), str(EXAMPLES / "ps_between_graph.py"), "--",
         "--steps", "1000000", "--checkpoint-every", "50"],
        cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not events(metrics(tmp_path / "log", "worker-0"), "step"):
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "training never started"
            time.sleep(0.5)
        tasks = processes_with_env("TFHELM_LOG_DIR", str(tmp_path / "log"))
        launchers = set(children(proc.pid)) & set(tasks)
        assert len(launchers) == 2, tasks  # worker-0's and ps-0's (each runs its script in a child)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "SIGINT: stopping every task" in output
    assert alive(tasks) == []
    assert processes_with_env("TFHELM_LOG_DIR", str(tmp_path / "log")) == []
