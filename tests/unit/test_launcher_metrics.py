"""The launcher's Prometheus metrics (tfhelm.pod.metrics, .events): TFRecord framing and Event
protobufs read by hand (records built here with an encoder of their own), the text format, and
the endpoint of a real launcher process in script mode."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tfhelm.cluster.localrun import LAUNCHER
from tfhelm.pod import events as tfevents
from tfhelm.pod import metrics


# -- an encoder of our own: protobuf wire format and TFRecord framing

def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num: int, value) -> bytes:
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    return varint(num << 3 | 2) + varint(len(value)) + value


def fixed64(num: int, x: float) -> bytes:
    return varint(num << 3 | 1) + struct.pack("<d", x)


def fixed32(num: int, x: float) -> bytes:
    return varint(num << 3 | 5) + struct.pack("<f", x)


def tensor(dtype: int, content: bytes = b"", dims=(), **vals) -> bytes:
    """A TensorProto: dtype (1), shape (2: repeated dim 2 with size 1), content (4) or *_val."""
    shape = b"".join(field(2, field(1, d)) for d in dims)
    out = field(1, dtype) + field(2, shape)
    if content:
        out += field(4, content)
    for num, packed in vals.values():
        out += field(num, packed)
    return out


def value(tag: str, *, simple=None, tensor_proto=None, plugin="scalars") -> bytes:
    out = field(1, tag.encode())
    if simple is not None:
        out += fixed32(2, simple)
    if tensor_proto is not None:
        out += field(9, field(1, field(1, plugin.encode()))) + field(8, tensor_proto)
    return out


def event(wall: float, step: int, *values: bytes, file_version: str = "") -> bytes:
    out = fixed64(1, wall) + field(2, step)
    if file_version:
        out += field(3, file_version.encode())
    if values:
        out += field(5, b"".join(field(1, v) for v in values))
    return out


def record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", tfevents.masked_crc(length)) + data
            + struct.pack("<I", tfevents.masked_crc(data)))


def scalar_f32(x: float) -> bytes:
    return tensor(1, struct.pack("<f", x))


def write_events(path: Path, *events: bytes, mode="wb") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as f:
        for e in events:
            f.write(record(e))


# -- checksums and parsing

@pytest.mark.parametrize("data,crc", [
    (b"123456789", 0xE3069283),  # the check value of CRC-32C
    (bytes(32), 0x8A9136AA),  # RFC 3720 B.4 test vectors
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
])
def test_crc32c_matches_the_published_vectors(data, crc):
    assert tfevents.crc32c(data) == crc


def test_masked_crc_is_tfrecords():
    """TFRecord masks the CRC: rotate right by 15 bits, add 0xa282ead8."""
    crc = tfevents.crc32c(b"abc")
    assert tfevents.masked_crc(b"abc") == ((crc >> 15 | crc << 17) + 0xA282EAD8) & 0xFFFFFFFF


@pytest.mark.parametrize("proto,expected", [
    (scalar_f32(0.25), 0.25),  # TF2 tf.summary.scalar: a float32 tensor's content
    (tensor(2, struct.pack("<d", 1.5)), 1.5),
    (tensor(9, struct.pack("<q", -7)), -7.0),
    (tensor(1, float_val=(5, struct.pack("<f", 2.5))), 2.5),  # float_val, packed
    (tensor(2, double_val=(6, struct.pack("<d", 3.25))), 3.25),
    (tensor(3, int_val=(7, varint(-3))), -3.0),  # int_val, packed varints
    (tensor(19, struct.pack("<e", 0.5)), 0.5),  # half
    (tensor(14, struct.pack("<I", struct.unpack("<I", struct.pack("<f", 1.75))[0])[2:]), 1.75),  # bfloat16
    (tensor(1, struct.pack("<ff", 1, 2), dims=(2,)), None),  # a vector (a histogram's shape)
    (tensor(7, b"text"), None),  # a string: the text plugin
])
def test_scalar_tensors_are_read_and_others_are_not(proto, expected):
    _, _, scalars = tfevents.parse_event(event(1.0, 3, value("t", tensor_proto=proto)))
    assert scalars == ([] if expected is None else [("t", expected)])


def test_an_event_gives_wall_time_step_and_every_scalar():
    data = event(1700000000.5, 1234, value("loss", tensor_proto=scalar_f32(0.5)),
                 value("accuracy", simple=0.75))
    assert tfevents.parse_event(data) == (1700000000.5, 1234, [("loss", 0.5), ("accuracy", 0.75)])
    assert tfevents.parse_event(event(1.0, -1)) == (1.0, -1, [])  # int64 steps may be negative


# -- the event files of a run

def test_progress_is_the_newest_step_and_scalars_per_directory(tmp_path):
    write_events(tmp_path / "train" / "events.out.tfevents.1.host.1.0.v2",
                 event(100.0, 0, file_version="brain.Event:2"),
                 event(101.0, 10, value("loss", tensor_proto=scalar_f32(2.0))),
                 event(102.0, 20, value("loss", tensor_proto=scalar_f32(1.0)),
                       value("lr", tensor_proto=scalar_f32(0.125))))
    write_events(tmp_path / "validation" / "events.out.tfevents.2.host.1.0.v2",
                 event(103.0, 20, value("loss", simple=1.5)))
    write_events(tmp_path / "not-events.txt", event(104.0, 99, value("loss", simple=9.0)))
    p = tfevents.Progress(str(tmp_path))
    p.update()
    assert {d: (r["step"], {t: v for t, (_, v) in r["scalars"].items()}) for d, r in p.runs.items()} == {
        "train": (20, {"loss": 1.0, "lr": 0.125}),
        "validation": (20, {"loss": 1.5}),
    }


def test_records_are_read_once_and_a_half_written_record_later(tmp_path):
    path = tmp_path / "events.out.tfevents.1.host.1.0.v2"
    write_events(path, event(1.0, 1, value("loss", simple=1.0)))
    p = tfevents.Progress(str(tmp_path))
    p.update()
    whole = record(event(2.0, 2, value("loss", simple=0.5)))
    with open(path, "ab") as f:
        f.write(whole[:len(whole) - 3])  # the writer is in the middle of it
    p.update()
    assert p.runs["."]["step"] == 1
    with open(path, "ab") as f:
        f.write(whole[-3:])
    p.update()
    assert p.runs["."]["step"] == 2 and p.runs["."]["scalars"]["loss"][1] == 0.5
    assert p.offsets[str(path)] == path.stat().st_size


def test_a_corrupt_record_stops_that_file_only(tmp_path, capsys):
    bad = bytearray(record(event(5.0, 50, value("loss", simple=5.0))))
    bad[-6] ^= 0xFF  # a byte of the data: the record's CRC no longer matches
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "events.out.tfevents.1.h.1.0.v2").write_bytes(
        record(event(1.0, 1, value("loss", simple=1.0))) + bytes(bad)
        + record(event(6.0, 60, value("loss", simple=6.0))))
    write_events(tmp_path / "b" / "events.out.tfevents.1.h.1.0.v2", event(2.0, 7, value("x", simple=7.0)))
    p = tfevents.Progress(str(tmp_path))
    p.update()
    p.update()
    assert p.runs["a"]["step"] == 1 and p.runs["b"]["step"] == 7
    assert capsys.readouterr().err.count("bad record checksum") == 1


def test_the_newest_event_wins_across_writers_of_one_directory(tmp_path):
    """Two files in one directory (a restarted task's new writer): the newest wall time."""
    write_events(tmp_path / "events.out.tfevents.2.h.1.0.v2", event(10.0, 30, value("loss", simple=0.3)))
    write_events(tmp_path / "events.out.tfevents.1.h.1.0.v2", event(20.0, 12, value("loss", simple=0.9)))
    p = tfevents.Progress(str(tmp_path))
    p.update()
    assert p.runs["."]["step"] == 12 and p.runs["."]["scalars"]["loss"] == (20.0, pytest.approx(0.9))


# -- the text format

def config(role="worker", index=0, chief=False):
    cluster = {"worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]}
    if chief:
        cluster["chief"] = ["c0:2222"]
    return {"cluster": cluster, "task": {"type": role, "index": index}}


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_text(text: str) -> dict:
    """Samples of Prometheus text: {(name, frozenset(labels)): value}; checks HELP/TYPE."""
    out, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("#") or not line:
            continue
        head, val = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        assert name in typed or re.sub("_(bucket|sum|count)$", "", name) in typed, f"{name} has no TYPE line"
        labels = LABEL.findall(rest)
        assert ",".join(f'{k}="{v}"' for k, v in labels) == rest[:-1], f"bad labels: {line}"
        out[(name, frozenset((k, json.loads(f'"{v}"')) for k, v in labels))] = float(val)
    return out


def test_task_metrics_carry_cluster_role_and_index(tmp_path):
    env = {"TFHELM_CLUSTER": "mnist", "TFHELM_STATE_DIR": str(tmp_path),
           "TFHELM_INDEX_FAILURES": "2", "TFHELM_INDEX_IGNORED_FAILURES": ""}
    m = metrics.TaskMetrics(config("ps", 0), env, clock=lambda: 1700000000.0)
    samples = parse_text(m.render())
    at = frozenset({"cluster": "mnist", "role": "ps", "index": "0"}.items())
    assert samples == {("tfhelm_task_up", at): 1, ("tfhelm_task_start_time_seconds", at): 1700000000.0,
                       ("tfhelm_task_restarts_total", at): 2}
    # The container restarted in the same pod (its /tmp, an emptyDir, is kept): one more.
    again = metrics.TaskMetrics(config("ps", 0), env)
    assert parse_text(again.render())[("tfhelm_task_restarts_total", at)] == 3


@pytest.mark.parametrize("task,chief,reports", [
    (("worker", 0), False, True), (("worker", 1), False, False), (("ps", 0), False, False),
    (("chief", 0), True, True), (("worker", 0), True, False),
])
def test_one_task_reads_the_event_files(tmp_path, task, chief, reports):
    """The first task (chief 0, else worker 0) reads the shared log dir; the others do not."""
    write_events(tmp_path / "logs" / "train" / "events.out.tfevents.1.h.1.0.v2",
                 event(5.0, 42, value("loss", tensor_proto=scalar_f32(0.5)), value('we"ird\\', simple=1.0)))
    env = {"TFHELM_CLUSTER": "mnist", "TFHELM_STATE_DIR": str(tmp_path), "TFHELM_LOG_DIR": str(tmp_path / "logs")}
    samples = parse_text(metrics.TaskMetrics(config(*task, chief=chief), env).render())
    at = {"cluster": "mnist", "role": task[0], "index": str(task[1]), "dir": "train"}
    step = samples.get(("tfhelm_train_step", frozenset(at.items())))
    assert step == (42 if reports else None)
    if reports:
        assert samples[("tfhelm_train_scalar", frozenset({**at, "tag": "loss"}.items()))] == 0.5
        assert samples[("tfhelm_train_scalar", frozenset({**at, "tag": 'we"ird\\'}.items()))] == 1.0
        assert samples[("tfhelm_train_last_event_time_seconds", frozenset(at.items()))] == 5.0


def test_no_port_no_server():
    assert metrics.start_metrics(config(), {}) is None


def test_a_taken_port_is_a_warning_not_a_failure(tmp_path, capsys):
    env = {"TFHELM_METRICS_PORT": "0", "TFHELM_STATE_DIR": str(tmp_path)}
    first = metrics.start_metrics(config(), env)
    try:
        env["TFHELM_METRICS_PORT"] = str(first.server_address[1])
        assert metrics.start_metrics(config(), env) is None
        assert "warning: metrics not served" in capsys.readouterr().err
    finally:
        first.close()


# -- a real launcher process

def scrape(port: int, path="/metrics") -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def test_script_mode_serves_metrics_while_the_script_runs(tmp_path):
    """PID 1 (the launcher) serves; the script, its child, is unchanged and writes events."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    logs = tmp_path / "logs"
    events = logs / "events.out.tfevents.1.h.1.0.v2"
    done = tmp_path / "done"
    helper = Path(__file__)
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(helper.parent.parent.parent)!r})\n"
        "from tests.unit.test_launcher_metrics import event, value, write_events, scalar_f32\n"
        "from pathlib import Path\n"
        "for step in (1, 2, 3):\n"
        f"    write_events(Path({str(events)!r}), event(time.time(), step, value('loss', tensor_proto=scalar_f32(1 / step))), mode='ab')\n"
        f"while not Path({str(done)!r}).exists():\n"
        "    time.sleep(0.05)\n")
    env = {**os.environ, "TF_CONFIG": json.dumps(config()), "TFHELM_CLUSTER": "mnist",
           "TFHELM_METRICS_PORT": str(port), "TFHELM_LOG_DIR": str(logs), "TFHELM_STATE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, str(LAUNCHER), "script", str(script)], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        samples = {}
        while time.monotonic() < deadline:
            try:
                samples = parse_text(scrape(port))
            except OSError:
                samples = {}
            at = frozenset({"cluster": "mnist", "role": "worker", "index": "0", "dir": "."}.items())
            if samples.get(("tfhelm_train_step", at)) == 3:
                break
            time.sleep(0.05)
        assert samples.get(("tfhelm_train_step", at)) == 3, samples
        assert samples[("tfhelm_train_scalar", at | {("tag", "loss")})] == pytest.approx(1 / 3)
        assert samples[("tfhelm_task_up", frozenset({"cluster": "mnist", "role": "worker", "index": "0"}.items()))] == 1
        with pytest.raises(urllib.error.HTTPError):
            scrape(port, "/nope")
    finally:
        done.touch()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert f"metrics on :{port}/metrics" in err


@pytest.mark.parametrize("task,chief,decides", [
    (("worker", 1), False, True), (("ps", 0), False, False),
    (("chief", 0), True, True), (("worker", 0), True, False), (("evaluator", 0), True, False),
])
def test_the_tasks_that_decide_completion_say_so(tmp_path, task, chief, decides):
    """The reaper's `auto` completion: the chief's Job if there is one, else the workers'. The
    alert on parameter servers that outlive training looks for PS without such a task."""
    env = {"TFHELM_CLUSTER": "mnist", "TFHELM_STATE_DIR": str(tmp_path)}
    samples = parse_text(metrics.TaskMetrics(config(*task, chief=chief), env).render())
    at = frozenset({"cluster": "mnist", "role": task[0], "index": str(task[1])}.items())
    assert samples.get(("tfhelm_task_decides_completion", at)) == (1 if decides else None)


def test_a_metrics_bug_is_a_warning_not_a_failed_task(tmp_path, capsys, monkeypatch):
    def broken(*_a, **_k):
        raise RuntimeError("a bug of ours")
    monkeypatch.setattr(metrics, "TaskMetrics", broken)
    assert metrics.start_metrics(config(), {"TFHELM_METRICS_PORT": "0"}) is None
    assert "warning: metrics not served: RuntimeError: a bug of ours" in capsys.readouterr().err
