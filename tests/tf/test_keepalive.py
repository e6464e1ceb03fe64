"""The chart's gRPC keepalive (`nodeFailure.grpcOptions`, every task's TF_GRPC_DEFAULT_OPTIONS)
as TensorFlow 2.21 takes it: a call that waits long on a live peer goes on (the peer does not
answer the pings with GOAWAY "too many pings"), and a call to a peer that stopped answering
(frozen: SIGSTOP, no reset, as a hung machine) fails with UnavailableError instead of hanging
until TCP gives up (~15 minutes), so the task exits 75 and is retried."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

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
# A call to a PS that stops answering (the test freezes it now): it must fail.
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


def test_keepalive_keeps_long_calls_and_fails_a_call_to_a_frozen_peer(tmp_path):
    options = default_values()["nodeFailure"]["grpcOptions"]
    assert "keepalive_time_ms" in options
    ps, worker = (f"localhost:{p}" for p in free_ports(2))
    server = subprocess.Popen([sys.executable, "-c", SERVER, ps, worker], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=TASK_ENV)
    try:
        assert server.stdout.readline() == "serving\n"
        env = {**TASK_ENV, "TF_GRPC_DEFAULT_OPTIONS": options}
        client = subprocess.Popen([sys.executable, "-c", CLIENT, ps, worker, "35"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        assert client.stdout.readline() == "waiting\n", client.stderr.read()
        assert client.stdout.readline() == "got 7\n", client.stderr.read()
        assert client.stdout.readline() == "blocked\n"
        frozen = time.monotonic()
        os.kill(server.pid, signal.SIGSTOP)
        # Without keepalive this read would wait until TCP gives up; the timeout is a safety net.
        try:
            out, err = client.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            client.kill()
            out, err = client.communicate()
            raise AssertionError(f"the call to a frozen peer still waits after 600 s:\n{err[-3000:]}") from None
        assert out.startswith("failed UnavailableError"), (out, err[-2000:])
        print(f"a call to a frozen peer failed after {time.monotonic() - frozen:.0f} s ({options})")
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
        server.wait()
