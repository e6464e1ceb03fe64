"""The chart's init container script (files/fetch.py) against a real HTTP server on loopback."""

import hashlib
import http.server
import os
import subprocess
import sys
import threading
from functools import partial

import pytest

from tfhelm.chart import chart_path

FETCH = str(chart_path() / "charts" / "tf-cluster-lib" / "files" / "fetch.py")


@pytest.fixture
def server(tmp_path):
    (tmp_path / "train.py").write_text("print('training')\n")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def fetch(*args):
    env = {**os.environ, "TFHELM_FETCH_BACKOFF": "0.01"}
    return subprocess.run([sys.executable, FETCH, *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_downloads_the_script_and_checks_its_sha256(server, tmp_path):
    dest = tmp_path / "out.py"
    good = hashlib.sha256(b"print('training')\n").hexdigest()
    result = fetch(f"{server}/train.py", str(dest), good)
    assert result.returncode == 0, result.stderr
    assert dest.read_text() == "print('training')\n"


def test_a_checksum_mismatch_fails_and_writes_nothing(server, tmp_path):
    dest = tmp_path / "out.py"
    result = fetch(f"{server}/train.py", str(dest), "0" * 64)
    assert result.returncode == 1 and "does not match" in result.stderr
    assert not dest.exists()


def test_a_missing_file_fails_at_once(server, tmp_path):
    result = fetch(f"{server}/nope.py", str(tmp_path / "out.py"), "")
    assert result.returncode == 1 and "404" in result.stderr and "attempt" not in result.stderr


def test_an_unreachable_server_is_retried(tmp_path):
    result = fetch("http://127.0.0.1:9/train.py", str(tmp_path / "out.py"), "")
    assert result.returncode == 1 and "attempt 5 failed" in result.stderr


def test_the_py_files_listed_beside_the_script_come_along(server, tmp_path):
    # The file server (nginx autoindex, here http.server) lists the script's directory.
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    dest = tmp_path / "out" / "train.py"
    dest.parent.mkdir()
    result = fetch(f"{server}/train.py", str(dest), "")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in dest.parent.iterdir()) == ["helpers.py", "train.py"]
    assert (dest.parent / "helpers.py").read_text() == "X = 1\n"
