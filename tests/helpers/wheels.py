"""A tiny pure-Python wheel, written directly (no build backend, no index): what a user keeps
in a wheel directory for the `code.packages` of an offline cluster."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def make_wheel(directory: Path, name: str, version: str, code: str) -> Path:
    """`<name>-<version>-py3-none-any.whl` holding module `<name>` with `code`."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": code,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tfhelm-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def digest(text: str) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()

    record = "".join(f"{path},sha256={digest(text)},{len(text.encode())}\n" for path, text in files.items())
    files[f"{dist}/RECORD"] = record + f"{dist}/RECORD,,\n"
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel
