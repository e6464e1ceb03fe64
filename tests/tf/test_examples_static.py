"""The examples as files: each with only tfhelm_example.py beside it, no TF at import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers import EXAMPLES

SCRIPTS = ["ps_between_graph.py", "ps_in_graph.py", "collective.py"]
SHARED = "tfhelm_example.py"


def test_what_the_examples_share_lives_once():
    shared = (EXAMPLES / SHARED).read_text()
    assert "class Env" in shared and "def make_dataset" in shared
    for name in SCRIPTS:
        text = (EXAMPLES / name).read_text()
        assert "from tfhelm_example import" in text
        assert "class Env" not in text and "def make_dataset" not in text, name


@pytest.mark.parametrize("name", SCRIPTS)
def test_runs_with_only_the_shared_module_and_help_needs_no_tensorflow(name, tmp_path):
    """Run from a directory holding just the script and tfhelm_example.py (what
    `tfhelm up --script` ships), as the launcher runs it: --help must not import TensorFlow."""
    script = tmp_path / name
    script.write_text((EXAMPLES / name).read_text())
    (tmp_path / SHARED).write_text((EXAMPLES / SHARED).read_text())
    code = ("import os, runpy, sys; sys.argv = [sys.argv[1], '--help']\n"
            "sys.path.insert(0, os.path.dirname(sys.argv[0]))  # as the launcher does\n"
            "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'tensorflow' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code, str(script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--crash-after-checkpoint" in done.stdout and "--steps" in done.stdout
