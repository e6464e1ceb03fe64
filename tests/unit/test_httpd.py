"""The pods' HTTP server (tfhelm/pod/httpd.py: the tasks' and the reaper's metrics, TensorBoard's
login proxy) under abuse, on loopback: idle connections neither block nor starve anyone, the
cap closes the oldest idle ones, a slow head times out, bodies are bounded, a full queue is
a 503 at once. (tests/realpods/test_abuse.py does it from another tenant's pod.)"""

from __future__ import annotations

import http.client
import socket
import threading

import pytest

from tests.unit.test_reaper import wait_until
from tfhelm.pod import httpd


def ok(request: httpd.Request) -> httpd.Response:
    return httpd.text(200, f"{request.method} {request.target}\n")


@pytest.fixture
def serve():
    servers = []

    def start(handler=ok, **limits) -> httpd.Server:
        server = httpd.Server(handler, 0, host="127.0.0.1", **limits).start()
        servers.append(server)
        return server
    yield start
    for s in servers:
        s.close()


def get(port: int, path: str = "/", method: str = "GET", body: bytes | None = None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def idle(port: int, n: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]


def test_answers_and_closes_every_connection(serve):
    server = serve()
    assert get(server.port, "/metrics?x=1") == (200, b"GET /metrics?x=1\n")
    assert get(server.port, "/", "HEAD") == (200, b"")
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b"".join(iter(lambda: s.recv(65536), b""))  # the server ends the connection
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in answer


def test_idle_connections_over_the_cap_close_the_oldest_and_everyone_else_is_served(serve):
    server = serve(max_connections=50)
    held = idle(server.port, 200)  # four times the cap, none sends a byte
    for _ in range(20):
        assert get(server.port)[0] == 200
    assert server.evicted >= 150
    assert len(server._pending) <= 50  # what it holds (and its memory) stays at the cap
    assert held[0].recv(1) == b""  # the oldest were closed
    for s in held:
        s.close()


def test_a_head_that_does_not_arrive_in_time_is_a_408(serve):
    server = serve(head_timeout=0.3)
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: slow\r\n")  # never the blank line
    s.settimeout(5)
    assert s.recv(100).startswith(b"HTTP/1.1 408")
    assert server.timed_out == 1
    assert get(server.port)[0] == 200


def test_a_head_too_large_is_refused_without_growing(serve):
    server = serve(max_head=1024)
    status, _ = get(server.port, headers={"X-Big": "x" * 4096})
    assert status == 431


def test_garbage_is_a_400(serve):
    server = serve()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"\x16\x03\x01 not http\r\n\r\n")
    s.settimeout(5)
    assert s.recv(100).startswith(b"HTTP/1.1 400")


def test_a_body_is_read_on_demand_and_bounded(serve):
    def echo(request):
        return httpd.Response(200, request.body(limit=1000))
    server = serve(echo)
    assert get(server.port, "/", "POST", b"x" * 1000) == (200, b"x" * 1000)
    assert get(server.port, "/", "POST", b"x" * 1001)[0] == 413


def test_busy_workers_and_a_full_queue_answer_503_at_once(serve):
    entered, release = threading.Event(), threading.Event()

    def slow(request):
        entered.set()
        release.wait(10)
        return httpd.text(200, "late\n")
    server = serve(slow, workers=1, backlog=1)
    first = threading.Thread(target=get, args=(server.port,))  # holds the worker
    second = threading.Thread(target=get, args=(server.port,))  # waits in the queue
    first.start()
    assert entered.wait(10)
    second.start()
    wait_until(lambda: server._work.full())
    assert get(server.port)[0] == 503
    release.set()
    first.join(10)
    second.join(10)


def test_a_failing_handler_is_a_500_not_a_dead_server(serve):
    def broken(request):
        raise RuntimeError("bug")
    server = serve(broken)
    assert get(server.port)[0] == 500
    assert get(server.port)[0] == 500
