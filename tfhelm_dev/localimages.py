"""The real nodes' image stores: the archive of hack/images/build.py imported once, shared by
every node through hard links.

The archive is a directory (its layer tars hard links to the packed layers); the import
reads it as one tar stream, so the 2.4 GB are never written a second time.

Importing the 2.4 GB archive costs about a minute of a node's containerd (unpacking writes
every file of every layer). So it is imported once, into a template store (a containerd root
of its own, run briefly only for that), whenever the archive changed; each node's store is a
hard-link copy of the template (seconds, no extra disk): layer contents and snapshot files are
written once and never modified in place (overlayfs copies a file up before changing it),
and only containerd's small metadata databases are real copies. Node stores stay in the build
cache across runs and are copied again only when the template changed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from tfhelm.errors import TfhelmError

STAMP = "imported.key"  # the archive's images.key a store holds
# containerd's bolt databases: written in place, so every store needs its own copy.
DATABASES = ("io.containerd.metadata.v1.bolt/meta.db", "io.containerd.snapshotter.v1.overlayfs/metadata.db")
INSTANCE_FILES = ("io.containerd.grpc.v1.introspection/uuid",)  # regenerated per containerd
IMPORTER = "importer.pid"  # the import's containerd, while it runs


class LocalImagesError(TfhelmError):
    """The images could not be imported into the nodes' stores."""


def archive_key(archive: Path) -> str:
    key = archive.parent / "images.key"
    manifest = (archive / "manifest.json").stat()
    return key.read_text().strip() if key.is_file() else f"{manifest.st_size}-{manifest.st_mtime_ns}"


def _stamp(store: Path) -> str | None:
    try:
        return (store / STAMP).read_text().strip()
    except OSError:
        return None


def prepare_template(template: Path, archive: Path, bins: Path, config: str) -> bool:
    """Import the archive into the template store unless it holds this archive already;
    True if it imported. `config` is a containerd config with ROOT, STATE and SOCKET to fill in."""
    key = archive_key(archive)
    if _stamp(template) == key:
        return False
    template.mkdir(parents=True, exist_ok=True)
    # One import at a time (the template is shared by every clone on the machine); the lock
    # goes with its holder's death, the import's containerd (its own session) does not.
    with open(template.parent / f"{template.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp(template) == key:  # another clone imported it while we waited
            return False
        _kill_orphan(template / IMPORTER)
        # From empty: an import over the last one would keep the old images' layers (GBs).
        # The nodes' stores are hard-link copies: theirs stay until they are copied again.
        shutil.rmtree(template)
        template.mkdir()
        _import(template, archive, bins, config)
        (template / STAMP).write_text(key)
    return True


def _kill_orphan(pidfile: Path) -> None:
    """Stop an import's containerd whose importer died (it would hold the databases' locks)."""
    try:
        pid = int(pidfile.read_text())
        if b"containerd" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.killpg(pid, signal.SIGKILL)
            for _ in range(100):  # gone, or a zombie: its locks are released either way
                if b"zombie" in Path(f"/proc/{pid}/status").read_bytes():
                    break
                time.sleep(0.1)
    except (OSError, ValueError):
        pass
    pidfile.unlink(missing_ok=True)


def _import(template: Path, archive: Path, bins: Path, config: str) -> None:
    with tempfile.TemporaryDirectory(prefix="tfhelm-images-") as tmp:
        socket = Path(tmp) / "containerd.sock"
        conf = Path(tmp) / "containerd.toml"
        conf.write_text(config.replace("ROOT", str(template)).replace("STATE", f"{tmp}/state")
                        .replace("SOCKET", str(socket)))
        log = Path(tmp) / "containerd.log"
        # A mount namespace of its own: unpacking mounts snapshots, none may reach the host.
        with open(log, "wb") as out:
            daemon = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--",
                                       str(bins / "containerd"), "--config", str(conf)],
                                      stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        (template / IMPORTER).write_text(str(daemon.pid))
        try:
            deadline = time.monotonic() + 30
            while not socket.exists():
                if daemon.poll() is not None or time.monotonic() > deadline:
                    raise LocalImagesError(f"containerd for the image import did not start: {log.read_text()[-2000:]}")
                time.sleep(0.1)
            _stream_import(archive, [str(bins / "ctr"), "--address", str(socket), "-n", "k8s.io", "images",
                                     "import", "--all-platforms", "--snapshotter", "overlayfs", "-"])
        finally:
            os.killpg(daemon.pid, signal.SIGTERM)  # a clean exit closes the databases
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
            (template / IMPORTER).unlink(missing_ok=True)


def _stream_import(archive: Path, ctr: list[str]) -> None:
    """Feed the archive directory to `ctr images import -` as a tar, manifest first."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(ctr, stdin=subprocess.PIPE, stdout=err, stderr=err)
        try:
            with tarfile.open(fileobj=proc.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                names = sorted(p.relative_to(archive).as_posix() for p in archive.rglob("*") if p.is_file())
                for name in sorted(names, key=lambda n: n != "manifest.json"):
                    tar.add(archive / name, name, recursive=False)
        except BrokenPipeError:
            pass  # ctr stopped reading: its exit status and message say why
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            rc = proc.wait(900)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        if rc != 0:
            err.seek(0)
            raise LocalImagesError(f"ctr images import {archive}: {err.read().decode(errors='replace').strip()}")


def node_store(template: Path, store: Path) -> bool:
    """Make `store` a copy of the template unless it is one of its current content already;
    True if it copied."""
    if _stamp(store) is not None and _stamp(store) == _stamp(template):
        return False
    shutil.rmtree(store, ignore_errors=True)
    store.parent.mkdir(parents=True, exist_ok=True)
    tmp = store.with_name(store.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = subprocess.run(["cp", "-a", "--link", str(template), str(tmp)], capture_output=True, text=True)
    if proc.returncode != 0:  # e.g. the cache spans two filesystems: no hard links
        raise LocalImagesError(f"could not hard-link {template} to {tmp}: {proc.stderr.strip()}")
    for db in DATABASES:
        if (template / db).is_file():
            (tmp / db).unlink()
            shutil.copy2(template / db, tmp / db)
    for f in INSTANCE_FILES:
        (tmp / f).unlink(missing_ok=True)
    tmp.rename(store)
    return True
