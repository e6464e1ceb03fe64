"""The training's progress, read from the TensorBoard event files the script already writes
(tf.summary, Keras' TensorBoard callback): TFRecord framing and the Event protobuf parsed
here, since the launcher has the standard library only. The user's script changes in nothing."""

from __future__ import annotations

import os
import struct

from tfhelm.pod.logs import log


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        for _ in range(8):
            n = (n >> 1) ^ 0x82F63B78 if n & 1 else n >> 1
        table.append(n)
    return table


_CRC32C = _crc_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of TFRecord files."""
    crc, table = 0xFFFFFFFF, _CRC32C
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC of `data` (rotated right by 15 bits, plus a constant)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def proto_fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes else."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = buf[i:i + size], i + size
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        else:
            raise ValueError(f"protobuf wire type {wire} is not supported")
        yield key >> 3, wire, value


# TensorProto dtypes of a scalar summary -> struct format of their tensor_content.
_DTYPES = {1: "f", 2: "d", 3: "i", 4: "B", 5: "h", 6: "b", 9: "q", 19: "e"}
_BFLOAT16 = 14


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a TensorProto holding one number (tf.summary.scalar's), else None
    (histograms, images, text: not scalars)."""
    dtype, content, vals = 0, None, []
    for num, wire, v in proto_fields(buf):
        if num == 1:
            dtype = v
        elif num == 2 and any(n == 2 for n, _, _ in proto_fields(v)):
            return None  # a dimension: not a scalar
        elif num == 4:
            content = v
        elif num in (5, 6):  # float_val, double_val: packed or one by one
            fmt = "<f" if num == 5 else "<d"
            step = struct.calcsize(fmt)
            vals += [struct.unpack_from(fmt, v, k)[0] for k in range(0, len(v) - step + 1, step)]
        elif num in (7, 10, 13) and wire == 0:  # int_val, int64_val, half_val (bits)
            vals.append(v)
        elif num in (7, 10, 13):
            k = 0
            while k < len(v):
                x, k = _varint(v, k)
                vals.append(x)
    if dtype == _BFLOAT16 or (dtype == 19 and vals and content is None):
        bits = struct.unpack("<H", content[:2])[0] if content else vals[0] if vals else None
        if bits is None:
            return None
        return (struct.unpack("<f", struct.pack("<I", bits << 16))[0] if dtype == _BFLOAT16
                else struct.unpack("<e", struct.pack("<H", bits))[0])
    if dtype not in _DTYPES:
        return None
    if content:
        return float(struct.unpack_from("<" + _DTYPES[dtype], content)[0])
    if not vals:
        return None
    x = vals[0]
    if dtype in (3, 9) and x >= 1 << 63:
        x -= 1 << 64
    return float(x)


def parse_event(data: bytes) -> tuple[float, int, list[tuple[str, float]]]:
    """(wall_time, step, [(tag, value)]) of a serialized Event: its scalar summary values,
    old-style (simple_value) and TF2 (a scalar tensor)."""
    wall, step, scalars = 0.0, 0, []
    for num, wire, v in proto_fields(data):
        if num == 1 and wire == 1:
            wall = struct.unpack("<d", v)[0]
        elif num == 2 and wire == 0:
            step = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 5 and wire == 2:
            for n, _, value in proto_fields(v):
                if n != 1:
                    continue
                tag, number = "", None
                for f, w, x in proto_fields(value):
                    if f == 1:
                        tag = x.decode("utf-8", "replace")
                    elif f == 2 and w == 5:
                        number = struct.unpack("<f", x)[0]
                    elif f == 8:
                        number = _tensor_scalar(x)
                if tag and number is not None:
                    scalars.append((tag, number))
    return wall, step, scalars


class Progress:
    """The training's latest step and scalars, per directory of event files under `root`.

    Each file is read from where the last scrape stopped; a record still being written
    (too short) is read next time, a record whose CRC is wrong ends the reading of that file.
    The newest event (by wall time) of a directory gives its step; each tag keeps its newest
    value. At most `max_files` files are read (the first, in sorted order)."""

    def __init__(self, root: str, max_files: int = 500):
        self.root, self.max_files = root, max_files
        self.offsets: dict[str, int | None] = {}
        self.runs: dict[str, dict] = {}  # dir -> {"wall", "step", "scalars": {tag: (wall, value)}}

    def update(self) -> None:
        paths: list[str] = []
        for here, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            paths += [os.path.join(here, n) for n in sorted(names) if ".tfevents." in n]
            if len(paths) >= self.max_files:
                break
        for path in paths[:self.max_files]:
            self._read(path)

    def _read(self, path: str) -> None:
        offset = self.offsets.get(path, 0)
        if offset is None:
            return
        run = os.path.relpath(os.path.dirname(path), self.root)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                while True:
                    head = f.read(12)
                    if len(head) < 12:
                        break
                    length, crc = struct.unpack("<QI", head)
                    if crc != masked_crc(head[:8]):
                        raise ValueError("bad length checksum")
                    body = f.read(length + 4)
                    if len(body) < length + 4:
                        break
                    if struct.unpack("<I", body[length:])[0] != masked_crc(body[:length]):
                        raise ValueError("bad record checksum")
                    self._event(run, body[:length])
                    offset += 12 + length + 4
        except OSError:
            pass  # gone, or not readable now: try again next time
        except (ValueError, IndexError, struct.error) as e:
            log(f"warning: {path}: {e} at byte {offset}; its later records are not read")
            self.offsets[path] = None
            return
        self.offsets[path] = offset

    def _event(self, run: str, data: bytes) -> None:
        wall, step, scalars = parse_event(data)
        if not scalars:
            return
        r = self.runs.setdefault(run, {"wall": wall, "step": step, "scalars": {}})
        if wall >= r["wall"]:
            r["wall"], r["step"] = wall, step
        for tag, value in scalars:
            if wall >= r["scalars"].get(tag, (wall, 0))[0]:
                r["scalars"][tag] = (wall, value)
