"""TensorBoard behind the user's login (stdlib only): the user-env chart runs this in
TensorBoard's pod, in front of TensorBoard, which listens on 127.0.0.1 only.

usage: authproxy.py LISTEN_PORT TENSORBOARD_PORT TOKEN_FILE

The token is the notebook's login token (`tfhelm user url` prints both URLs with it). A
request passes with `Authorization: token T` (Jupyter's form) or `Bearer T`, or in a browser
with `?token=T` once: the answer sets a session cookie holding an HMAC of the token (never
the token itself), which the page's own requests then carry. No credentials: 401; wrong ones: 403.
READY answers the readiness probe without a token and tells only whether TensorBoard answers.
"""
import hashlib
import hmac
import http.client
import http.cookies
import signal
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

COOKIE = "tfhelm-tensorboard"
READY = "/tfhelm-auth/ready"
# Hop-by-hop headers (RFC 9110 7.6.1) stay on their hop; credentials stop here.
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "transfer-encoding", "upgrade", "host", "authorization", "cookie", "content-length"}

listen_port, upstream_port, token_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def login_token() -> str:
    """Read on every request: a new token (the user added again) takes effect at once."""
    try:
        with open(token_file) as f:
            return f.read().strip()
    except OSError:
        return ""


def session(token: str) -> str:
    return hmac.new(token.encode(), b"tfhelm-tensorboard-session", hashlib.sha256).hexdigest()


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tfhelm-authproxy"
    sys_version = ""

    def do_GET(self):
        self.handle_any()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def handle_any(self) -> None:
        url = urlsplit(self.path)
        if url.path == READY:
            return self.ready()
        token = login_token()
        query = parse_qsl(url.query, keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        if given:  # a browser's first visit (or a script): the token, traded for a cookie
            if not (token and hmac.compare_digest(given[0], token)):
                return self.refuse(403, "wrong token")
            path = urlunsplit(("", "", url.path, urlencode([(k, v) for k, v in query if k != "token"]), ""))
            return self.forward(path, {"Set-Cookie": f"{COOKIE}={session(token)}; Path=/; HttpOnly; SameSite=Lax"})
        verdict = self.credentials(token)
        if verdict is None:
            return self.refuse(401, "log in with the notebook's token: open the TensorBoard URL "
                               "`tfhelm user url` prints, or send `Authorization: token TOKEN`")
        if not verdict:
            return self.refuse(403, "wrong token")
        self.forward(self.path)

    def credentials(self, token: str):
        """True: the user's; False: someone's wrong credentials; None: none given."""
        header = self.headers.get("Authorization")
        if header:
            scheme, _, value = header.partition(" ")
            return bool(token) and scheme.lower() in ("token", "bearer") and \
                hmac.compare_digest(value.strip(), token)
        cookies = http.cookies.SimpleCookie()
        try:
            cookies.load(self.headers.get("Cookie") or "")
        except http.cookies.CookieError:
            return False
        if COOKIE in cookies:
            return bool(token) and hmac.compare_digest(cookies[COOKIE].value, session(token))
        return None

    def ready(self) -> None:
        try:
            socket.create_connection(("127.0.0.1", upstream_port), timeout=2).close()
            self.reply(200, "ok\n")
        except OSError:
            self.reply(503, "TensorBoard is not answering yet\n")

    def refuse(self, code: int, why: str) -> None:
        headers = {"WWW-Authenticate": 'Token realm="tensorboard"'} if code == 401 else {}
        self.reply(code, f"{code}: {why}\n", headers)

    def reply(self, code: int, body: str, headers: dict | None = None) -> None:
        data = body.encode()
        self.send_response(code)
        for k, v in {"Content-Type": "text/plain; charset=utf-8", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def forward(self, path: str, extra: dict | None = None) -> None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self.reply(411, "send a Content-Length\n")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=300)
        try:
            upstream.request(self.command, path, body, headers)
            resp = upstream.getresponse()
        except OSError:
            upstream.close()
            return self.reply(502, "TensorBoard is not answering\n")
        try:
            self.relay(resp, extra or {})
        finally:
            upstream.close()

    def relay(self, resp: http.client.HTTPResponse, extra: dict) -> None:
        """The answer, streamed: with its length when TensorBoard gave one, else chunked."""
        self.send_response(resp.status, resp.reason)
        for k, v in [*resp.getheaders(), *extra.items()]:
            if k.lower() not in HOP:
                self.send_header(k, v)
        bodiless = self.command == "HEAD" or resp.status in (204, 304) or resp.status < 200
        length = resp.getheader("Content-Length")
        if length is not None:
            self.send_header("Content-Length", length)
        elif not bodiless:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if bodiless:
            return
        while chunk := resp.read1(65536):
            self.wfile.write(chunk if length is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk))
        if length is None:
            self.wfile.write(b"0\r\n\r\n")

    def log_message(self, fmt, *args) -> None:
        pass  # the request line may hold ?token=: log_request says what matters, without it

    def log_request(self, code="-", size="-") -> None:
        path = urlsplit(self.path).path
        sys.stderr.write(f"{self.address_string()} {self.command} {path} {code}\n")


def main() -> None:
    # PID 1 of its container: without a handler SIGTERM would wait for the grace period.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = ThreadingHTTPServer(("0.0.0.0", listen_port), Proxy)
    server.daemon_threads = True
    print(f"TensorBoard (127.0.0.1:{upstream_port}) behind the login token on :{listen_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
