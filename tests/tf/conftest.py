"""The tf tier: real TensorFlow (CPU) processes on loopback, driven by what the chart renders.

Every test here gets the `tf` marker. Tests that start TensorFlow are marked `needs_tf`:
without TensorFlow in the venv (`make tf-deps`) they are skipped, except under CI or with
TFHELM_REQUIRE_TF=1, where that is a failure.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
HAVE_TF = importlib.util.find_spec("tensorflow") is not None
REQUIRE_TF = os.environ.get("CI") == "true" or os.environ.get("TFHELM_REQUIRE_TF") == "1"


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_tf: starts TensorFlow processes")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.tf)


@pytest.fixture(autouse=True)
def _tensorflow(request):
    if request.node.get_closest_marker("needs_tf") and not HAVE_TF:
        if REQUIRE_TF:
            pytest.fail("TensorFlow is not installed in this venv: run `make tf-deps`")
        pytest.skip("TensorFlow is not installed: run `make tf-deps`")
