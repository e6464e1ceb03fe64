# tfhelm/pod/httpd.py without its prose (make chart-files)
from __future__ import annotations
import io
import os
import queue
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from email.message import Message
from http import HTTPStatus
from http.client import HTTPException, parse_headers
from typing import Callable, Iterable
_END = b"\r\n\r\n"
class BodyTooLarge(Exception):
    pass
@dataclass
class Response:
    status: int
    body: bytes | Iterable[bytes] = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    reason: str | None = None
def text(status: int, body: str, headers: list[tuple[str, str]] | None = None,
         content_type: str = "text/plain; charset=utf-8") -> Response:
    return Response(status, body.encode(), [("Content-Type", content_type), *(headers or [])])
@dataclass
class Request:
    method: str
    target: str
    headers: Message
    client: tuple
    _sock: socket.socket
    _rest: bytes
    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]
    def body(self, limit: int) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raise BodyTooLarge("send a Content-Length")
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit() or int(length) > limit:
            raise BodyTooLarge(f"a body of at most {limit} bytes")
        want, data = int(length), bytearray(self._rest)
        while len(data) < want:
            chunk = self._sock.recv(min(65536, want - len(data)))
            if not chunk:
                break
            data += chunk
        return bytes(data[:want])
Handler = Callable[[Request], Response]
@dataclass
class _Pending:
    sock: socket.socket
    client: tuple
    deadline: float
    head: bytearray = field(default_factory=bytearray)
class Server:
    def __init__(self, handler: Handler, port: int, host: str | None = None, *, max_connections: int = 1024,
                 head_timeout: float = 10.0, write_timeout: float = 30.0, max_head: int = 16384,
                 workers: int = 4, backlog: int = 64, name: str = "tfhelm-http"):
        self.handler, self.name = handler, name
        self.head_timeout, self.write_timeout, self.max_head = head_timeout, write_timeout, max_head
        self.max_connections = min(max_connections, _open_files() - workers - 32)
        self.sock = _listen(host, port)
        self.server_address = self.sock.getsockname()
        self._pending: dict[int, _Pending] = {}
        self._work: queue.Queue = queue.Queue(backlog)
        self._selector = selectors.DefaultSelector()
        self._closed = threading.Event()
        self._threads = [threading.Thread(target=self._loop, name=name, daemon=True)]
        self._threads += [threading.Thread(target=self._worker, name=f"{name}-{i}", daemon=True)
                          for i in range(workers)]
        self.evicted = self.timed_out = 0
    @property
    def port(self) -> int:
        return self.server_address[1]
    def start(self) -> "Server":
        self.sock.setblocking(False)
        self._selector.register(self.sock, selectors.EVENT_READ)
        for t in self._threads:
            t.start()
        return self
    def close(self) -> None:
        self._closed.set()
        for _ in self._threads[1:]:
            try:
                self._work.put_nowait(None)
            except queue.Full:
                break
    def _loop(self) -> None:
        try:
            while not self._closed.is_set():
                for key, _ in self._selector.select(timeout=1.0):
                    if key.fileobj is self.sock:
                        self._accept()
                    else:
                        self._read(key.fileobj)
                self._expire(time.monotonic())
        finally:
            for p in list(self._pending.values()):
                self._drop(p)
            self._selector.close()
            self.sock.close()
    def _accept(self) -> None:
        for _ in range(256):
            try:
                sock, client = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._evict_oldest()
                return
            while len(self._pending) >= self.max_connections:
                self._evict_oldest()
            sock.setblocking(False)
            p = _Pending(sock, client, time.monotonic() + self.head_timeout)
            self._pending[sock.fileno()] = p
            self._selector.register(sock, selectors.EVENT_READ)
    def _evict_oldest(self) -> None:
        if self._pending:
            self.evicted += 1
            self._drop(next(iter(self._pending.values())))
    def _expire(self, now: float) -> None:
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.deadline > now:
                return
            self.timed_out += 1
            self._drop(oldest, b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    def _drop(self, p: _Pending, answer: bytes = b"") -> None:
        self._pending.pop(p.sock.fileno(), None)
        try:
            self._selector.unregister(p.sock)
        except (KeyError, ValueError):
            pass
        if answer:
            try:
                p.sock.send(answer)
            except OSError:
                pass
        p.sock.close()
    def _read(self, sock: socket.socket) -> None:
        p = self._pending.get(sock.fileno())
        if p is None:
            return
        try:
            chunk = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(p)
            return
        p.head += chunk
        end = p.head.find(_END)
        if end < 0:
            if len(p.head) > self.max_head:
                self._drop(p, _status_only(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE))
            return
        self._pending.pop(sock.fileno())
        self._selector.unregister(sock)
        head, rest = bytes(p.head[:end + 2]), bytes(p.head[end + 4:])
        request = _parse(head, rest, p.client, sock)
        if request is None:
            self._drop(p, _status_only(HTTPStatus.BAD_REQUEST))
            return
        try:
            self._work.put_nowait(request)
        except queue.Full:
            self._drop(p, _status_only(HTTPStatus.SERVICE_UNAVAILABLE))
    def _worker(self) -> None:
        while (request := self._work.get()) is not None:
            sock = request._sock
            try:
                sock.setblocking(True)
                sock.settimeout(self.write_timeout)
                self._answer(request, sock)
            except Exception:
                pass
            finally:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
    def _answer(self, request: Request, sock: socket.socket) -> None:
        try:
            response = self.handler(request)
        except BodyTooLarge as e:
            response = text(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"413: {e}\n")
        except Exception as e:
            response = text(HTTPStatus.INTERNAL_SERVER_ERROR, f"500: {type(e).__name__}\n")
        status = HTTPStatus(response.status) if response.status in HTTPStatus._value2member_map_ else None
        reason = response.reason or (status.phrase if status else "")
        lines = [f"HTTP/1.1 {response.status} {reason}"]
        names = {k.lower() for k, _ in response.headers}
        lines += [f"{k}: {v}" for k, v in response.headers if k.lower() != "connection"]
        body = response.body
        if isinstance(body, (bytes, bytearray)) and "content-length" not in names:
            lines.append(f"Content-Length: {len(body)}")
        lines.append("Connection: close")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if request.method == "HEAD":
            return
        for chunk in [body] if isinstance(body, (bytes, bytearray)) else body:
            if chunk:
                sock.sendall(chunk)
def _parse(head: bytes, rest: bytes, client: tuple, sock: socket.socket) -> Request | None:
    line, _, fields = head.partition(b"\r\n")
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        return None
    try:
        headers = parse_headers(io.BytesIO(fields + b"\r\n"))
    except (HTTPException, ValueError):
        return None
    return Request(parts[0].upper(), parts[1], headers, client, sock, rest)
def _status_only(status: HTTPStatus) -> bytes:
    return f"HTTP/1.1 {status.value} {status.phrase}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".encode()
def _listen(host: str | None, port: int) -> socket.socket:
    tries = [(socket.AF_INET, host)] if host else [(socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")]
    error: OSError | None = None
    for family, address in tries:
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as e:
            error = e
            continue
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((address, port))
            sock.listen(1024)
            return sock
        except OSError as e:
            sock.close()
            error = e
    raise error
def _open_files() -> int:
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            want = 65536 if hard == resource.RLIM_INFINITY else hard
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        return soft
    except (ImportError, ValueError, OSError):
        return os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024
