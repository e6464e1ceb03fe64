"""Reading back what the examples left: metrics lines, checkpoints, TensorBoard events.

No TensorFlow here: the test process stays small and never forks with TF's threads around.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from pathlib import Path

from tests.helpers.pods import plan_from_manifests
from tfhelm.cluster import manifests

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# Quiet TF's C++ INFO logs in the tasks; everything else as the user would have it.
TASK_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def topology(values: dict, release: str = "demo", namespace: str = "team-a", ports=None):
    """Tasks and script args exactly as the chart renders them (`helm template`)."""
    return plan_from_manifests(manifests.render(values, release, namespace), ports)


class Collect:
    """A localrun sink that keeps every line (and echoes it, for pytest's failure report)."""

    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def __call__(self, task: str, line: str) -> None:
        self.lines.append((task, line))
        sys.stdout.write(f"[{task}] {line}\n")

    def text(self, task: str | None = None) -> str:
        return "\n".join(line for t, line in self.lines if task in (None, t))


def metrics(log_dir: Path, task: str) -> list[dict]:
    path = log_dir / "metrics" / f"{task}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events(lines: list[dict], kind: str) -> list[dict]:
    return [e for e in lines if e["event"] == kind]


def latest_checkpoint_step(directory: Path) -> int | None:
    """The step of the checkpoint TensorFlow's `checkpoint` index file names as latest."""
    index = directory / "checkpoint"
    if not index.exists():
        return None
    m = re.search(r'^model_checkpoint_path: "(?:.*/)?[^"]*-(\d+)"', index.read_text(), re.M)
    return int(m.group(1)) if m else None


# --- TensorBoard event files: TFRecord framing + a minimal protobuf wire-format reader ----

def _records(path: Path):
    data = path.read_bytes()
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 12  # length + its CRC
        yield data[pos:pos + length]
        pos += length + 4  # data + its CRC


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _scalar_value(value: bytes) -> tuple[str, float | None]:
    """A Summary.Value: tag (1), simple_value (2, TF1) or tensor (8, TF2 float scalar)."""
    tag, number = "", None
    for field, wire, v in _fields(value):
        if field == 1:
            tag = v.decode()
        elif field == 2 and wire == 5:
            number = struct.unpack("<f", v)[0]
        elif field == 8:  # TensorProto: float_val (5) or tensor_content (4)
            for f2, w2, v2 in _fields(v):
                if f2 == 5 and w2 == 2 and len(v2) >= 4:
                    number = struct.unpack_from("<f", v2)[0]
                elif f2 == 5 and w2 == 5:
                    number = struct.unpack("<f", v2)[0]
                elif f2 == 4 and len(v2) == 4:
                    number = struct.unpack("<f", v2)[0]
    return tag, number


def scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} from every event file in `directory`."""
    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for record in _records(path):
            step, values = 0, []
            for field, _wire, v in _fields(record):
                if field == 2:
                    step = v
                elif field == 5:  # Summary
                    values += [val for f, _w, val in _fields(v) if f == 1]
            for value in values:
                tag, number = _scalar_value(value)
                if number is not None:
                    out.setdefault(tag, []).append((step, number))
    return out


# --- processes ------------------------------------------------------------------------------

def children(parent: int) -> list[int]:
    """Direct children of `parent`, from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            out.append(int(stat.parent.name))
    return out


def alive(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        out.append(pid)
    return out


def processes_with_env(key: str, value: str) -> list[int]:
    """Processes whose environment has key=value (e.g. the tasks of one run directory)."""
    needle = f"{key}={value}".encode()
    out = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                out.append(int(environ.parent.name))
        except OSError:
            continue
    return out
