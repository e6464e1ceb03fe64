"""The Python API as its users see it: docs/api.md is generated from the API's docstrings
and the options' declarations (stale: `make api-docs`); `tfhelm.up` takes exactly the
declared options as keywords; its errors are one class per exit code."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import tfhelm
from tfhelm import apierrors, errors
from tfhelm.cluster.options import declared

REPO = Path(__file__).resolve().parents[2]


def test_the_api_reference_is_generated_from_the_docstrings():
    spec = importlib.util.spec_from_file_location("api_docs", REPO / "hack" / "api-docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (REPO / "docs" / "api.md").read_text() == module.reference(), "docs/api.md is stale: run `make api-docs`"


def test_every_declared_option_is_a_keyword_of_up_and_render():
    for fn in (tfhelm.up, tfhelm.render):
        keywords = {p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY}
        assert {name for name, _ in declared()} <= keywords, fn
    with pytest.raises(TypeError, match="unexpected keyword argument 'wokers'"):
        tfhelm.up("m", wokers=2)


def test_bad_input_is_the_clis_line_as_the_exception_of_exit_code_2(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(tfhelm.UsageError, match=r"^--workers: must be at least 1") as e:
        tfhelm.render("m", namespace="team-a", workers=0, values_only=True)
    assert isinstance(e.value, tfhelm.SpecError) and e.value.exit_code == errors.BAD_INPUT
    assert {code: cls.exit_code for code, cls in errors.EXCEPTIONS.items()} == {c: c for c in range(1, 6)}


def test_a_release_error_is_raised_as_the_class_of_its_exit_code():
    refused = apierrors.as_exception(errors.ReleaseError("ns", "m", "install", "dial tcp 10.0.0.1:6443: i/o timeout"))
    assert isinstance(refused, tfhelm.NoCluster) and str(refused) == "install ns/m failed: dial tcp 10.0.0.1:6443: i/o timeout"


def test_import_tfhelm_loads_neither_the_api_nor_its_clients():
    code = ("import sys, tfhelm; print(sorted({m.split('.')[0] for m in sys.modules} & {'kubernetes', 'pyhelm3', "
            "'rich', 'yaml', 'typer'}), 'tfhelm.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] False", out
