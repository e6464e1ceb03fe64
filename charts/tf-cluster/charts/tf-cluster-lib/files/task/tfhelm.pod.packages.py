# tfhelm/pod/packages.py without its prose (make chart-files)
from __future__ import annotations
import hashlib
import json
import os
import shutil
import signal
import sys
from tfhelm.pod.logs import log
from tfhelm.pod.supervise import termination_message
PACKAGES_MARKER = ".tfhelm-installed"
class CacheChanged(Exception):
    pass
def install_packages(shared: str, private: str, options: list[str], requirements: list[str]) -> int:
    import fcntl
    os.makedirs(os.path.dirname(shared), exist_ok=True)
    with open(f"{shared}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another task is installing the packages into {shared}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        record = _read_record(shared)
        if record is None:
            code = _install(shared, options, requirements)
            if code:
                return code
            record = _read_record(shared)
            _remove_other_runs(shared)
        else:
            log(f"packages already installed in {shared} (by {record['by']})")
    try:
        copied = copy_checked(shared, private, record["files"])
    except CacheChanged as e:
        shutil.rmtree(private, ignore_errors=True)
        message = f"the installed packages in {shared} were changed after pip wrote them: {e}"
        log(f"error: {message}")
        termination_message(message)
        return 1
    log(f"{copied} files checked and copied into {private}")
    return 0
def _remove_other_runs(shared: str) -> None:
    import fcntl
    parent, mine = os.path.split(shared)
    for name in os.listdir(parent):
        other = os.path.join(parent, name)
        if name == mine or name.endswith(".lock") or not os.path.isdir(other):
            continue
        with open(f"{other}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(other, ignore_errors=True)
            os.unlink(f"{other}.lock")
def _read_record(shared: str) -> dict | None:
    try:
        with open(os.path.join(shared, PACKAGES_MARKER), encoding="utf-8") as f:
            record = json.load(f)
        return record if isinstance(record, dict) and isinstance(record.get("files"), dict) else None
    except (OSError, ValueError):
        return None
def _install(shared: str, options: list[str], requirements: list[str]) -> int:
    import subprocess
    from urllib.parse import urlparse
    shutil.rmtree(shared, ignore_errors=True)
    log(f"installing {' '.join(requirements)} into {shared}")
    trusted = [urlparse(url).hostname for flag, url in zip(options, options[1:])
               if flag in ("--index-url", "--find-links") and url.startswith("http://")]
    options = options + [arg for host in trusted for arg in ("--trusted-host", host)]
    env = {**os.environ, "PYTHONUSERBASE": shared, "PIP_BREAK_SYSTEM_PACKAGES": "1"}
    pip = subprocess.Popen(
        [sys.executable, "-m", "pip", "install", "--user", "--no-cache-dir", "--progress-bar", "off",
         "--disable-pip-version-check", "--no-warn-script-location", *options, *requirements],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    signal.signal(signal.SIGTERM, lambda *_: pip.terminate())
    error = last = ""
    for line in pip.stdout:
        sys.stdout.write(line)
        last = line.strip() or last
        if line.startswith("ERROR:") and not error:
            error = line.strip()
    if pip.wait() != 0:
        message = f"pip could not install {' '.join(requirements)}: {error or last}"
        log(f"error: {message}")
        termination_message(message)
        return 1
    os.makedirs(shared, exist_ok=True)
    record = {"by": os.environ.get("HOSTNAME", "?"), "requirements": requirements, "files": hashes(shared)}
    with open(os.path.join(shared, PACKAGES_MARKER), "w", encoding="utf-8") as f:
        json.dump(record, f, sort_keys=True)
    log(f"installed into {shared} ({len(record['files'])} files)")
    return 0
def _files(root: str):
    for here, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(here, name)
            rel = os.path.relpath(path, root)
            if rel != PACKAGES_MARKER:
                yield rel, path
def hashes(root: str) -> dict[str, str]:
    out = {}
    for rel, path in _files(root):
        if os.path.islink(path):
            out[rel] = "link:" + os.readlink(path)
            continue
        with open(path, "rb") as f:
            digest = hashlib.sha256()
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        out[rel] = digest.hexdigest()
    return out
def copy_checked(shared: str, private: str, record: dict[str, str]) -> int:
    shutil.rmtree(private, ignore_errors=True)
    seen = set()
    for rel, path in _files(shared):
        want = record.get(rel)
        if want is None:
            raise CacheChanged(f"{rel} was added")
        dest = os.path.join(private, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.islink(path):
            target = os.readlink(path)
            if want != "link:" + target:
                raise CacheChanged(f"{rel} differs")
            os.symlink(target, dest)
        else:
            digest = hashlib.sha256()
            with open(path, "rb") as f, open(dest, "wb") as out:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != want:
                raise CacheChanged(f"{rel} differs")
            shutil.copymode(path, dest)
        seen.add(rel)
    missing = sorted(set(record) - seen)
    if missing:
        raise CacheChanged(f"{missing[0]} is gone")
    return len(seen)
