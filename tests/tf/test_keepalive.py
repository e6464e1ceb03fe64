"""The chart's gRPC keepalive (`nodeFailure.grpcOptions`, every task's TF_GRPC_DEFAULT_OPTIONS)
as TensorFlow 2.21 takes it: a call that waits long on a live peer goes on (the peer does not
answer the pings with GOAWAY "too many pings"), and a peer that stops answering (frozen:
SIGSTOP, no reset, as a hung machine) has the connection of the waiting call closed by the
pings (seen from the kernel's TCP table: it leaves ESTABLISHED; without keepalive it would stay).

Whether the waiting call then fails is TensorFlow's choice, not keepalive's: TF 2.21 may issue
the call again on a new connection, and a frozen process whose kernel still accepts TCP
connections then keeps it waiting (seen in 2 of the last full runs, after 600 s). So this test
asserts the connection is closed, not that the call fails; on a lost node the task is ended by
its replacement and the reaper (docs/nodes.md; tests/realpods/test_node_failure.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tf.helpers import TASK_ENV
from tfhelm.chart import default_values

pytestmark = pytest.mark.needs_tf

SERVER = """
import sys, tensorflow as tf
cluster = tf.train.ClusterSpec({"ps": [sys.argv[1]], "worker": [sys.argv[2]]})
tf.distribute.Server(cluster, job_name="ps", task_index=0, start=True)
print("serving", flush=True)
sys.stdin.read()
"""
CLIENT = """
import sys, threading, time, tensorflow as tf
tf1 = tf.compat.v1
tf1.disable_eager_execution()
cluster = tf.train.ClusterSpec({"ps": [sys.argv[1]], "worker": [sys.argv[2]]})
server = tf.distribute.Server(cluster, job_name="worker", task_index=0, start=True)
graph = tf1.Graph()
with graph.as_default(), tf1.device("/job:ps/task:0"):
    queue = tf1.FIFOQueue(1, tf.int32, shared_name="q")
    take, give = queue.dequeue(), queue.enqueue(7)
config = tf1.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
session = tf1.Session(server.target, graph=graph, config=config)

def give_later(seconds):
    time.sleep(seconds)
    tf1.Session(server.target, graph=graph, config=config).run(give)

# A call blocked on the PS for longer than three keepalive pings: it must come back.
threading.Thread(target=give_later, args=(float(sys.argv[3]),), daemon=True).start()
print("waiting", flush=True)
print("got", session.run(take), flush=True)
# A call to a PS that stops answering (the test freezes it now): keepalive closes its connection.
print("blocked", flush=True)
try:
    session.run(take)
    print("got another", flush=True)
except tf.errors.OpError as e:
    print("failed", type(e).__name__, flush=True)
"""


def free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def established(port: int) -> set[str]:
    """The local ends of the ESTABLISHED TCP connections to `port` (this network namespace)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, remote, state = row.split()[1:4]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
                found.add(local)
    return found


def test_keepalive_keeps_long_calls_and_closes_the_connection_to_a_frozen_peer(tmp_path):
    options = default_values()["nodeFailure"]["grpcOptions"]
    assert "keepalive_time_ms" in options
    ps_port, worker_port = free_ports(2)
    ps, worker = f"localhost:{ps_port}", f"localhost:{worker_port}"
    server = subprocess.Popen([sys.executable, "-c", SERVER, ps, worker], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=TASK_ENV)
    client = None
    try:
        assert server.stdout.readline() == "serving\n"
        env = {**TASK_ENV, "TF_GRPC_DEFAULT_OPTIONS": options}
        client = subprocess.Popen([sys.executable, "-c", CLIENT, ps, worker, "35"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, env=env)
        assert client.stdout.readline() == "waiting\n"
        assert client.stdout.readline() == "got 7\n"  # the call that waited 35 s on a live peer came back
        assert client.stdout.readline() == "blocked\n"
        before = established(ps_port)
        assert before, "no connection to the PS"
        frozen = time.monotonic()
        os.kill(server.pid, signal.SIGSTOP)
        # Without keepalive the connection stays ESTABLISHED until TCP gives up (~15 minutes);
        # the limit is a safety net.
        while not before - established(ps_port):
            assert time.monotonic() - frozen < 600, "a connection to the frozen peer is still open after 600 s"
            time.sleep(0.5)
        print(f"keepalive closed a connection to a frozen peer after {time.monotonic() - frozen:.0f} s ({options})")
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
        server.wait()
        if client is not None:
            client.kill()
            client.wait()
