"""The per-user build cache's location: one rule (hack/cache-dir.sh), asked by the Makefile,
hack/cached-go-install.sh and tfhelm_dev.localcluster alike."""

import subprocess
from pathlib import Path

import pytest

from tfhelm_dev import localcluster

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("env,expected", [
    ({"TFHELM_CACHE_DIR": "/srv/cache", "XDG_CACHE_HOME": "/xdg"}, "/srv/cache"),
    ({"XDG_CACHE_HOME": "/xdg"}, "/xdg/tfhelm"),
    ({}, "{home}/.cache/tfhelm"),
])
def test_where_the_build_cache_is(monkeypatch, tmp_path, env, expected):
    for var in ("TFHELM_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    want = Path(expected.format(home=tmp_path))
    assert localcluster.cache_dir() == want
    assert localcluster.images_archive() == want / "images" / "archive"


def test_make_passes_a_command_line_cache_dir_on(tmp_path):
    """`make TFHELM_CACHE_DIR=...` reaches the script ($(shell) does not see command-line
    variables by itself)."""
    probe = tmp_path / "probe.mk"
    probe.write_text(f"include {REPO}/Makefile\nprobe: ; @echo $(TFHELM_CACHE)\n")
    out = subprocess.run(["make", "-s", "-C", str(REPO), "-f", str(probe), "probe",
                          "TFHELM_CACHE_DIR=/srv/other"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "/srv/other"
