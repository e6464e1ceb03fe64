"""`logFormat: json` / `tfhelm reap --log-format json`: one JSON object a line with ts, level,
logger, cluster (and the task's role and index, or the reaper's namespace) and msg; plain text
stays the default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tests.unit.test_reaper import FakeClient, job
from tfhelm import reaper
from tfhelm.cluster.localrun import LAUNCHER
from tfhelm.pod.logs import log
from tfhelm.cli import app
from tfhelm.reaper import default_config
from tfhelm.reaper.lines import json_record

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TASK = {"TFHELM_CLUSTER": "mnist", "TFHELM_TASK_TYPE": "worker", "TFHELM_TASK_INDEX": "3"}


def records(text: str) -> list[dict]:
    out = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert all(TS.match(r["ts"]) for r in out)
    return out


@pytest.mark.parametrize("msg,level,text", [
    ("worker:3 running /t.py", "info", "worker:3 running /t.py"),
    ("error: script /t.py does not exist", "error", "script /t.py does not exist"),
    ("warning: metrics not served", "warning", "metrics not served"),
])
def test_launcher_lines_are_json_objects(capsys, msg, level, text):
    log(msg, {**TASK, "TFHELM_LOG_FORMAT": "json"})
    (r,) = records(capsys.readouterr().err)
    assert {k: v for k, v in r.items() if k != "ts"} == {
        "level": level, "logger": "tfhelm-launcher", "cluster": "mnist", "role": "worker", "index": 3, "msg": text}
    assert list(r)[0] == "ts" and list(r)[-1] == "msg"


def test_plain_stays_the_default(capsys):
    log("error: boom", TASK)
    assert capsys.readouterr().err == "tfhelm-launcher: error: boom\n"


def test_the_task_comes_from_tf_config_when_set_by_hand(capsys):
    config = {"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 0}}
    log("hello", {"TFHELM_LOG_FORMAT": "json", "TF_CONFIG": json.dumps(config)})
    (r,) = records(capsys.readouterr().err)
    assert (r["role"], r["index"], "cluster" in r) == ("ps", 0, False)  # empty fields left out


def test_a_failing_script_is_one_record_with_its_traceback(tmp_path):
    """In a real launcher process: the launcher's lines and the script's uncaught error are all
    JSON; the traceback is a field, not lines a collector would split."""
    script = tmp_path / "train.py"
    script.write_text("print('the script speaks for itself')\nraise ValueError('bad\\nlabel')\n")
    env = {**os.environ, **TASK, "TFHELM_LOG_FORMAT": "json", "TFHELM_TASK_INDEX": "0",
           "TF_CONFIG": json.dumps({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 0}})}
    p = subprocess.run([sys.executable, str(LAUNCHER), "script", str(script)],
                       env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert p.stdout == "the script speaks for itself\n"  # the script's own output is its own
    rs = records(p.stderr)
    assert [(r["level"], r["msg"]) for r in rs] == [
        ("info", f"worker:0 running {script}"), ("error", "ValueError: bad")]
    assert "Traceback (most recent call last)" in rs[1]["traceback"]
    assert rs[1]["traceback"].endswith("ValueError: bad\nlabel")


def test_reaper_records_name_namespace_and_cluster():
    fc = FakeClient(job(state="Complete", succeeded=2))
    got: list[dict] = []
    res = reaper.Reaper(fc, "ns", "c", default_config(grace=0), backoff=(0.01, 0.05), log_record=got.append).run()
    assert res.action == reaper.REAP
    assert got and all(r["namespace"] == "ns" and r["cluster"] == "c" and r["level"] == "info" for r in got)
    assert got[-1]["msg"] == "reaped: deleted Deployment c-ps-0, Service c-ps-0; uninstalled release ns/c-ps"


def test_reaper_errors_and_warnings_have_their_level():
    fc = FakeClient(job(state="Complete", succeeded=2))
    fc.uninstall_failures = [RuntimeError("connection refused")]
    got: list[dict] = []
    reaper.Reaper(fc, "ns", "c", default_config(grace=0), backoff=(0.01, 0.05), log_record=got.append).run()
    (failed,) = [r for r in got if r["level"] == "error"]
    assert failed["msg"].startswith("reap failed, retrying in 0.05s: RuntimeError: connection refused")


def test_json_record_is_the_launchers_shape(capsys):
    json_record({"level": "warning", "namespace": "ns", "cluster": None, "msg": "API server unreachable"})
    (r,) = records(capsys.readouterr().err)
    assert {k: v for k, v in r.items() if k != "ts"} == {
        "level": "warning", "logger": "tfhelm-reaper", "namespace": "ns", "msg": "API server unreachable"}


def test_reap_rejects_an_unknown_log_format(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    result = CliRunner().invoke(app, ["reap", "c", "--log-format", "xml"])
    assert result.exit_code != 0
    assert "--log-format" in result.output and "use plain or json" in result.output
