"""TensorBoard's login proxy (tfhelm/pod/authproxy.py, the user-env chart's files/authproxy/) on
loopback, in front of a stand-in for TensorBoard: only the notebook's token passes, whichever
way it is given."""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

from tfhelm.chart import chart_path

PROXY = str(chart_path("user-env") / "files" / "authproxy" / "authproxy.py")
TOKEN = "s3cret-token"
BIG = b"x" * 300_000


class Upstream(http.server.BaseHTTPRequestHandler):
    """Answers with what it got; /big without a length (closes the connection after)."""

    def do_GET(self):
        if self.path == "/big":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(BIG)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = json.dumps({"method": self.command, "path": self.path, "body": body.decode(),
                           "authorization": self.headers.get("Authorization"),
                           "cookie": self.headers.get("Cookie")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET

    def log_message(self, *args):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    token = tmp_path_factory.mktemp("token") / "token"
    token.write_text(TOKEN + "\n")  # a trailing newline, as `kubectl create secret` may leave
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = free_port()
    proc = subprocess.Popen([sys.executable, PROXY, str(port), str(upstream.server_address[1]), str(token)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(300):  # until it listens and reaches the stand-in (the readiness probe's path)
        if request(port, "GET", "/tfhelm-auth/ready")[0] == 200:
            break
        time.sleep(0.1)
    yield port
    proc.terminate()  # SIGTERM: it exits at once (PID 1 of its container)
    assert proc.wait(10) == 0
    upstream.shutdown()
    assert TOKEN not in proc.stderr.read()  # the access log leaves ?token= out


def request(port, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    except OSError:
        return 0, {}, b""
    finally:
        conn.close()


def test_no_credentials_is_401_and_wrong_ones_403(proxy):
    assert request(proxy, "GET", "/data/runs")[0] == 401
    for headers in ({"Authorization": "token not-it"}, {"Authorization": f"Basic {TOKEN}"},
                    {"Cookie": "tfhelm-tensorboard=forged"}):
        assert request(proxy, "GET", "/data/runs", headers)[0] == 403, headers
    assert request(proxy, "GET", "/data/runs?token=not-it")[0] == 403


def test_the_token_passes_as_a_header_and_never_reaches_tensorboard(proxy):
    for scheme in ("token", "Bearer"):
        code, _, body = request(proxy, "POST", "/data/plugin/scalars?tag=loss",
                                {"Authorization": f"{scheme} {TOKEN}"}, body=b"runs=a")
        assert code == 200
        got = json.loads(body)
        assert (got["method"], got["path"], got["body"]) == ("POST", "/data/plugin/scalars?tag=loss", "runs=a")
        assert got["authorization"] is None and got["cookie"] is None


def test_a_browser_trades_the_token_for_a_session_cookie(proxy):
    code, headers, body = request(proxy, "GET", f"/?run=a&token={TOKEN}")
    assert code == 200 and json.loads(body)["path"] == "/?run=a"  # the token stays here
    cookie = headers["Set-Cookie"]
    assert TOKEN not in cookie and "HttpOnly" in cookie
    session = cookie.split(";")[0]
    assert request(proxy, "GET", "/data/runs", {"Cookie": f"other=1; {session}"})[0] == 200


def test_an_answer_without_length_is_relayed_whole(proxy):
    code, headers, body = request(proxy, "GET", "/big", {"Authorization": f"token {TOKEN}"})
    assert code == 200 and body == BIG  # delimited by the end of the connection
