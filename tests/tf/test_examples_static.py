"""The examples as files: self-contained, sharing one boilerplate block, no TF at import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers import EXAMPLES

SCRIPTS = ["ps_between_graph.py", "ps_in_graph.py", "collective.py"]
BEGIN = "# ==== tfhelm example boilerplate"
END = "# ==== end of the boilerplate"


def boilerplate(name: str) -> str:
    text = (EXAMPLES / name).read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, name
    return text[text.index(BEGIN):text.index(END)]


def test_boilerplate_is_identical_in_every_example():
    first = boilerplate(SCRIPTS[0])
    for name in SCRIPTS[1:]:
        assert boilerplate(name) == first, f"{name}: copy the boilerplate from {SCRIPTS[0]}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_self_contained_and_help_needs_no_tensorflow(name, tmp_path):
    """Run from an empty directory, as a downloaded single file would be: no sibling
    modules, and --help must not even import TensorFlow."""
    script = tmp_path / name
    script.write_text((EXAMPLES / name).read_text())
    code = ("import runpy, sys; sys.argv = [sys.argv[1], '--help']\n"
            "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'tensorflow' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code, str(script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--crash-after-checkpoint" in done.stdout and "--steps" in done.stdout
