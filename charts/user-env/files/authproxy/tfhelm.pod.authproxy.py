# tfhelm/pod/authproxy.py without its prose (make chart-files)
from __future__ import annotations
import hashlib
import hmac
import http.client
import http.cookies
import signal
import socket
import sys
import threading
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
from tfhelm.pod import httpd
COOKIE = "tfhelm-tensorboard"
READY = "/tfhelm-auth/ready"
BODY_MAX = 1 << 20
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "transfer-encoding", "upgrade", "host", "authorization", "cookie", "content-length"}
class Proxy:
    def __init__(self, upstream_port: int, token_file: str):
        self.upstream_port, self.token_file = upstream_port, token_file
    def login_token(self) -> str:
        try:
            with open(self.token_file) as f:
                return f.read().strip()
        except OSError:
            return ""
    def __call__(self, request: httpd.Request) -> httpd.Response:
        response = self.answer(request)
        log(request, response.status)
        return response
    def answer(self, request: httpd.Request) -> httpd.Response:
        url = urlsplit(request.target)
        if url.path == READY:
            return self.ready()
        token = self.login_token()
        query = parse_qsl(url.query, keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        if given:
            if not (token and hmac.compare_digest(given[0], token)):
                return refuse(403, "wrong token")
            path = urlunsplit(("", "", url.path, urlencode([(k, v) for k, v in query if k != "token"]), ""))
            return self.forward(request, path, [("Set-Cookie", f"{COOKIE}={session(token)}; Path=/; HttpOnly; SameSite=Lax")])
        verdict = credentials(request, token)
        if verdict is None:
            return refuse(401, "log in with the notebook's token: open the TensorBoard URL "
                          "`tfhelm user url` prints, or send `Authorization: token TOKEN`")
        if not verdict:
            return refuse(403, "wrong token")
        return self.forward(request, request.target)
    def ready(self) -> httpd.Response:
        try:
            socket.create_connection(("127.0.0.1", self.upstream_port), timeout=2).close()
            return httpd.text(200, "ok\n")
        except OSError:
            return httpd.text(503, "TensorBoard is not answering yet\n")
    def forward(self, request: httpd.Request, path: str, extra: list | None = None) -> httpd.Response:
        body = request.body(BODY_MAX) or None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=300)
        try:
            upstream.request(request.method, path, body, headers)
            resp = upstream.getresponse()
        except OSError:
            upstream.close()
            return httpd.text(502, "TensorBoard is not answering\n")
        out = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP] + (extra or [])
        length = resp.getheader("Content-Length")
        if length is not None:
            out.append(("Content-Length", length))
        return httpd.Response(resp.status, relay(resp, upstream), out, resp.reason)
def relay(resp: http.client.HTTPResponse, upstream: http.client.HTTPConnection):
    try:
        while chunk := resp.read1(65536):
            yield chunk
    finally:
        upstream.close()
def session(token: str) -> str:
    return hmac.new(token.encode(), b"tfhelm-tensorboard-session", hashlib.sha256).hexdigest()
def credentials(request: httpd.Request, token: str):
    header = request.headers.get("Authorization")
    if header:
        scheme, _, value = header.partition(" ")
        return bool(token) and scheme.lower() in ("token", "bearer") and hmac.compare_digest(value.strip(), token)
    cookies = http.cookies.SimpleCookie()
    try:
        cookies.load(request.headers.get("Cookie") or "")
    except http.cookies.CookieError:
        return False
    if COOKIE in cookies:
        return bool(token) and hmac.compare_digest(cookies[COOKIE].value, session(token))
    return None
def refuse(code: int, why: str) -> httpd.Response:
    headers = [("WWW-Authenticate", 'Token realm="tensorboard"')] if code == 401 else []
    return httpd.text(code, f"{code}: {why}\n", headers)
def log(request: httpd.Request, code: int) -> None:
    sys.stderr.write(f"{request.client[0]} {request.method} {urlsplit(request.target).path} {code}\n")
USAGE = "usage: authproxy.py LISTEN_PORT TENSORBOARD_PORT TOKEN_FILE"
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or not (argv[0].isdigit() and argv[1].isdigit()):
        print(USAGE, file=sys.stderr)
        return 2
    listen_port, upstream_port, token_file = argv
    server = httpd.Server(Proxy(int(upstream_port), token_file), int(listen_port), host="0.0.0.0",
                          workers=16, name="tfhelm-authproxy").start()
    print(f"TensorBoard (127.0.0.1:{upstream_port}) behind the login token on :{listen_port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    server.close()
    return 0
