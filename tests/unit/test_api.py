"""The Python API's own rules, without a cluster: in a user's workspace (a notebook) the
options default to the user's and a script of the work directory is taken from there; progress
shows where it can be seen and nowhere when not asked; status() is the report of `status -o json`."""

from __future__ import annotations

import io
import sys
import types

from rich.console import Console

from tfhelm.api import Status, display
from tfhelm.api.options import in_workspace
from tfhelm.cluster import report
from tfhelm.cluster.progress import ConsoleBars

from .test_cli_output import job, pod, ps


def test_in_a_workspace_the_user_and_a_script_of_the_work_dir_are_taken_as_they_are(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "models").mkdir(parents=True)
    (work / "models" / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(work / "models")
    assert in_workspace({"script": "train.py"}) == {"script": "train.py"}, "outside a workspace: unchanged"
    monkeypatch.setenv("TFHELM_USER", "alice")
    monkeypatch.setenv("TFHELM_CODE_DIR", str(work))
    assert in_workspace({"script": "train.py", "workers": 2}) == {
        "script": "models/train.py", "workers": 2, "user": "alice"}  # what the file server serves
    assert in_workspace({"script": str(work / "models" / "train.py")})["script"] == "models/train.py"
    elsewhere = tmp_path / "scratch.py"
    elsewhere.write_text("print('x')\n")
    assert in_workspace({"script": str(elsewhere)})["script"] == str(elsewhere), "shipped with the cluster"
    assert in_workspace({"script": "https://example.org/t.py"})["script"] == "https://example.org/t.py"
    assert in_workspace({"user": None, "script": "train.py"}) == {"user": None, "script": "train.py"}


def test_progress_shows_where_asked_and_a_live_bar_in_jupyter(monkeypatch):
    assert isinstance(display.bars(False), display.NoBars)
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal
    assert isinstance(display.bars(None), display.NoBars), "nothing printed unless asked"
    assert isinstance(display.bars(True), ConsoleBars)
    notes: list[str] = []
    assert display.notes(notes.append) == notes.append and display.notes(None)("x") is None
    # IPython's display, as a kernel has it (the dev venv has no IPython; the realpods tier
    # runs the real one: tests/realpods/test_notebook_api.py).
    shown = []

    class Handle:
        def update(self, html):
            shown.append(html.data)
    ipython = types.ModuleType("IPython.display")
    ipython.HTML = type("HTML", (), {"__init__": lambda self, data: setattr(self, "data", data)})
    ipython.display = lambda html, display_id: shown.append(html.data) or Handle()
    monkeypatch.setitem(sys.modules, "IPython.display", ipython)
    monkeypatch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    bars = display.JupyterBars()
    bars.start([("tasks of ns/c started", 3), ("worker tasks succeeded", 2)])
    bars.update([3, 1])
    bars.update([3, 2])
    bars.stop()
    assert len(shown) >= 3 and "<progress value='2' max='2'>" in shown[-1] and "3/3" in shown[-1]


def test_plain_lines_when_the_console_is_no_terminal():
    out = io.StringIO()
    bars = ConsoleBars(Console(file=out, force_terminal=False, width=200))
    bars.start([("tasks started", 3), ("worker tasks succeeded", 2)])
    bars.update([1, 0])
    bars.update([1, 0])
    bars.update([3, 2])
    bars.stop()
    assert out.getvalue().splitlines() == ["tasks started: 1/3, worker tasks succeeded: 0/2",
                                           "tasks started: 3/3, worker tasks succeeded: 2/2"]


def test_status_is_the_report_status_dash_o_json_prints():
    tasks = report.task_rows([pod("m-worker-0", "worker", 0, "Succeeded"), pod("m-ps-0", "ps", 0)])
    data = report.report("team-a", "m", tasks, [job("m", "worker", total=1, succeeded=1)], [ps("m", 0)], [])
    s = Status.from_report(data)
    assert s.to_dict() == data
    assert (s.training, s.done, s.parameter_servers.ready, s.jobs[0].succeeded) == ("Complete", True, 1, 1)
    assert [t.task for t in s.tasks] == ["worker:0", "ps:0"]
