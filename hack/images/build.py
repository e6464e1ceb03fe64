#!/usr/bin/env python3
"""Build the local cluster's container images without a registry or an image builder.

    hack/images/build.py OUT_DIR --helm BIN --wheel WHL --pause BIN --versions K=V ...

Each layer is a directory: the base is a Debian root made by debootstrap; every other
layer is the upper directory of an overlay mount on the layers below it, in which pip
ran in a chroot. Layers are packed as tars; OUT_DIR/archive/ is a Docker-format archive
as a directory (manifest.json, the image configs, each layer tar a hard link to the packed
one: no second copy of 2.4 GB) that tfhelm streams as a tar into `ctr images import -`;
containerd names the images itself from their RepoTags (short names, as the charts use them).
`--root-only` builds the Debian root and TensorFlow layers alone (they need neither helm nor
the wheel, so `make` builds them while helm builds).
Layers are cached by a key of their inputs under OUT_DIR/layers/, so only what changed
is rebuilt (a new tfhelm wheel rebuilds one small layer). Needs root (debootstrap,
mounts, chroot); runs in a private mount namespace so a failure leaves no mount behind.

The images stand in locally for the charts' default public images: the TensorFlow image
is Debian's Python with tensorflow-cpu from PyPI, the notebook image adds Jupyter,
TensorBoard, tfhelm (whose examples, the API's notebook among them, a workspace finds in
its work directory: jupyter_server_config.py) and helm, the file server is Debian's nginx.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

# Part of every layer's cache key: bump it when a change here must rebuild the layers.
LAYOUT = 2
# python-is-python3: `python` on PATH, as users of the public images type it.
BASE_PACKAGES = ["python3", "python-is-python3", "python3-pip", "ca-certificates", "nginx-light", "tini"]
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sh(*args: str, **kw) -> None:
    print("+", " ".join(args), file=sys.stderr, flush=True)
    subprocess.run(args, check=True, **kw)


def key_of(*parts: object) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:16]


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- layers

def debian_mirror() -> tuple[str, str]:
    """The suite and mirror this machine's apt uses (debootstrap fetches from there)."""
    suite = next(line.split("=", 1)[1].strip() for line in Path("/etc/os-release").read_text().splitlines()
                 if line.startswith("VERSION_CODENAME="))
    for src in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")):
        for line in src.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return suite, line.split()[1]
    for line in Path("/etc/apt/sources.list").read_text().splitlines():
        fields = line.split()
        if fields[:1] == ["deb"] and "security" not in line:
            return suite, fields[1]
    raise SystemExit("no Debian mirror found in /etc/apt")


def build_base(dest: Path) -> None:
    suite, mirror = debian_mirror()
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    sh("debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", suite, str(tmp), mirror)
    # What only the package manager needs; the image never runs apt.
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "var/cache/debconf", "usr/share/doc",
                 "usr/share/man", "usr/share/locale"):
        for p in (tmp / junk).glob("*"):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    (tmp / "etc/apt/sources.list").unlink(missing_ok=True)  # names the build machine's mirror
    # pip for users (a Jupyter terminal, a run's extra packages), as in the public images:
    # Debian marks its Python externally managed (PEP 668), which refuses every `pip install`.
    for marker in tmp.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    tmp.rename(dest)


def build_overlay(dest: Path, lowers: list[Path], script: str, binds: dict[str, Path] | None = None) -> None:
    """Run script (sh) chrooted in an overlay of lowers; dest becomes the upper dir."""
    tmp = dest.with_name(dest.name + ".tmp")
    work, merged = dest.with_name(dest.name + ".work"), dest.with_name(dest.name + ".merged")
    for d in (tmp, work, merged):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    lower = ":".join(str(p) for p in reversed(lowers))  # overlayfs: leftmost is the top
    sh("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={tmp},workdir={work}", str(merged))
    mounts = [merged]
    try:
        for fs, target in (("proc", "proc"), ("devtmpfs", "dev")):
            sh("mount", "-t", fs, fs, str(merged / target))
            mounts.append(merged / target)
        # The host's resolver, CA bundle and pip settings, for the install only.
        host_files = {"etc/resolv.conf": Path("/etc/resolv.conf"),
                      "etc/ssl/certs/ca-certificates.crt": Path("/etc/ssl/certs/ca-certificates.crt")}
        if Path("/etc/pip.conf").is_file():
            host_files["etc/pip.conf"] = Path("/etc/pip.conf")
        find_links = os.environ.get("PIP_FIND_LINKS", "")
        if find_links.startswith("/") and Path(find_links).is_dir():
            host_files[find_links.lstrip("/")] = Path(find_links)
        host_files.update(binds or {})
        for rel, src in host_files.items():
            target = merged / rel
            if src.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch(exist_ok=True)
            sh("mount", "--bind", str(src), str(target))
            mounts.append(target)
        env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
        env.update(PATH=PATH_ENV.split("=", 1)[1], HOME="/root", LANG="C.UTF-8",
                   PIP_NO_CACHE_DIR="1", PIP_ROOT_USER_ACTION="ignore", PIP_BREAK_SYSTEM_PACKAGES="1",
                   PYTHONDONTWRITEBYTECODE="1")
        sh("chroot", str(merged), "/bin/sh", "-euc", script, env=env)
    finally:
        for m in reversed(mounts):
            subprocess.run(["umount", "-l", str(m)], check=False)
    # Bind-mount targets created above would otherwise ship as empty files.
    for rel in ("etc/pip.conf", "etc/resolv.conf"):
        if (tmp / rel).exists() and (tmp / rel).stat().st_size == 0:
            (tmp / rel).unlink()
    for d in (work, merged):
        shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(tmp / "root/.cache", ignore_errors=True)
    tmp.rename(dest)


# ---------------------------------------------------------------- packing

class _HashingWriter:
    def __init__(self, f):
        self.f, self.h = f, hashlib.sha256()

    def write(self, b):
        self.h.update(b)
        return self.f.write(b)


def pack(layer: Path, out: Path) -> str:
    """Tar a layer directory, turning overlayfs whiteouts into OCI ones; returns its diff_id."""
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as f:
        w = _HashingWriter(f)
        with tarfile.open(fileobj=w, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for root, dirs, files in os.walk(layer):
                dirs.sort()
                for name in sorted(dirs) + sorted(files):
                    path = Path(root, name)
                    arc = str(path.relative_to(layer))
                    st = path.lstat()
                    if path.is_char_device() and st.st_rdev == 0:  # overlayfs: deleted below
                        tar.addfile(tarfile.TarInfo(str(Path(arc).with_name(".wh." + name))))
                        continue
                    info = tar.gettarinfo(str(path), arc)
                    if info.isreg():
                        with open(path, "rb") as src:
                            tar.addfile(info, src)
                    else:
                        tar.addfile(info)
                    if info.isdir() and _opaque(path):
                        tar.addfile(tarfile.TarInfo(arc + "/.wh..wh..opq"))
    tmp.rename(out)
    return "sha256:" + w.h.hexdigest()


def _opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, "trusted.overlay.opaque") == b"y"
    except OSError:
        return False


def write_archive(out: Path, images: list[dict], layer_tars: dict[str, tuple[Path, str]]) -> None:
    """A Docker-format archive as a directory (manifest.json, configs, layer tars as hard
    links) holding every image."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    manifest, written = [], set()
    for img in images:
        layers = img["layers"]
        config = {
            "architecture": "amd64", "os": "linux",
            "config": {"Env": [PATH_ENV, "LANG=C.UTF-8", "PYTHONUNBUFFERED=1", *img.get("env", [])],
                       "User": img.get("user", "1000:1000"), "WorkingDir": "/",
                       "Entrypoint": img.get("entrypoint"), "Cmd": img.get("cmd"),
                       "Labels": {"org.opencontainers.image.description":
                                  "built locally by tfhelm (hack/images/build.py) for the local cluster"}},
            "rootfs": {"type": "layers", "diff_ids": [layer_tars[name][1] for name in layers]},
        }
        data = json.dumps(config, sort_keys=True).encode()
        config_name = hashlib.sha256(data).hexdigest() + ".json"
        (tmp / config_name).write_bytes(data)
        for name in layers:
            if name not in written:
                (tmp / name).mkdir()
                os.link(layer_tars[name][0], tmp / name / "layer.tar")
                written.add(name)
        manifest.append({"Config": config_name, "RepoTags": img["tags"],
                         "Layers": [f"{name}/layer.tar" for name in layers]})
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


# ---------------------------------------------------------------- the images

def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--root-only", action="store_true", help="only the Debian root and TensorFlow layers")
    p.add_argument("--helm", type=Path)
    p.add_argument("--wheel", type=Path, help="the tfhelm wheel")
    p.add_argument("--pause", type=Path)
    p.add_argument("--tensorflow", required=True)
    p.add_argument("--notebook", required=True)
    p.add_argument("--tensorboard", required=True)
    a = p.parse_args()
    if not a.root_only and not (a.helm and a.wheel and a.pause):
        p.error("--helm, --wheel and --pause are needed (or --root-only)")
    if os.environ.get("TFHELM_IMAGES_UNSHARED") != "1":  # private mounts: nothing leaks on failure
        os.environ["TFHELM_IMAGES_UNSHARED"] = "1"
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable, *sys.argv])

    layers_dir = a.out / "layers"
    layers_dir.mkdir(parents=True, exist_ok=True)
    suite, _ = debian_mirror()
    keys: dict[str, str] = {}
    dirs: dict[str, Path] = {}

    def layer(name: str, *inputs: object, build) -> str:
        keys[name] = key_of(name, LAYOUT, *inputs)
        d = layers_dir / f"{name}-{keys[name]}"
        if not d.is_dir():
            for stale in layers_dir.glob(f"{name}-*"):
                shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
            print(f">> building layer {name}", file=sys.stderr, flush=True)
            build(d)
        dirs[name] = d
        return name

    base = layer("base", suite, BASE_PACKAGES, build=build_base)
    # tensorboard: tf.summary and Keras' TensorBoard callback need it; TF's wheel no longer pulls it.
    tf = layer("tensorflow", keys[base], a.tensorflow, a.tensorboard, build=lambda d: build_overlay(
        d, [dirs[base]], f"pip install -q tensorflow-cpu=={a.tensorflow} tensorboard=={a.tensorboard}"
        f" && {_tf_keras(a.tensorflow)}"))
    if a.root_only:
        return
    wheel_key = wheel_digest(a.wheel)
    deps = _wheel_requirements(a.wheel)
    # The notebook's Jupyter, tfhelm's dependencies and helm, then tfhelm itself (small,
    # rebuilt when the code changes).
    helm_key = file_digest(a.helm)
    install_helm = "install -m 0755 /mnt/helm /usr/local/bin/helm"
    nb = layer("notebook", keys[tf], a.notebook, deps, helm_key, build=lambda d: build_overlay(
        d, [dirs[base], dirs[tf]],
        f"pip install -q notebook=={a.notebook} {_quoted(deps)} && {install_helm}",
        {"mnt/helm": a.helm}))
    # Jupyter's settings: the wheel's examples copied into a workspace (jupyter_server_config.py).
    jupyter_config = Path(__file__).with_name("jupyter_server_config.py")
    nb_cli = layer("notebook-tfhelm", keys[nb], wheel_key, file_digest(jupyter_config), build=lambda d: build_overlay(
        d, [dirs[base], dirs[tf], dirs[nb]], f"pip install -q --no-deps /mnt/{a.wheel.name} && "
        "install -D -m 0644 /mnt/jupyter_server_config.py /etc/jupyter/jupyter_server_config.py",
        {f"mnt/{a.wheel.name}": a.wheel, "mnt/jupyter_server_config.py": jupyter_config}))
    pause = layer("pause", file_digest(a.pause), build=lambda d: (
        d.mkdir(), shutil.copy2(a.pause, d / "pause")))

    packed: dict[str, tuple[Path, str]] = {}
    for name, d in dirs.items():
        tar_path = d.with_suffix(".tar")
        id_path = d.with_suffix(".diffid")
        if not (tar_path.is_file() and id_path.is_file()):
            print(f">> packing layer {name}", file=sys.stderr, flush=True)
            id_path.write_text(pack(d, tar_path))
        packed[name] = (tar_path, id_path.read_text())

    images = [
        {"tags": [f"tensorflow/tensorflow:{a.tensorflow}"], "layers": [base, tf], "cmd": ["python3"]},
        {"tags": [f"tensorflow/tensorflow:{a.tensorflow}-jupyter"], "layers": [base, tf, nb, nb_cli],
         "cmd": ["jupyter", "notebook"]},
        # A plain Python (Debian's, no TensorFlow): a stand-in for the public python image.
        {"tags": ["python:3.11-slim"], "layers": [base], "cmd": ["python3"]},
        # Debian's nginx as the file server, run as the unprivileged image's user.
        {"tags": ["nginxinc/nginx-unprivileged:1.28-alpine"], "layers": [base], "user": "101:101",
         "cmd": ["nginx", "-g", "daemon off;"]},
        {"tags": ["tfhelm/pause:local"], "layers": [pause], "user": "65535:65535", "entrypoint": ["/pause"]},
    ]
    archive_key = key_of(*(v[1] for v in packed.values()), json.dumps(images))
    (a.out / "images.tar").unlink(missing_ok=True)  # the archive file of earlier versions
    out = a.out / "archive"
    stamp = a.out / "images.key"
    if not (out.is_dir() and stamp.is_file() and stamp.read_text() == archive_key):
        print(f">> writing {out}", file=sys.stderr, flush=True)
        write_archive(out, images, packed)
        stamp.write_text(archive_key)
    print(out)


def _tf_keras(tensorflow: str) -> str:
    """Keras 2 (tf-keras, same minor as TensorFlow) for programs that set
    TF_USE_LEGACY_KERAS=1. --no-deps: it requires `tensorflow`, which pip would install
    beside tensorflow-cpu (the same code again, 600 MB)."""
    minor = ".".join(tensorflow.split(".")[:2])
    return f"pip install -q --no-deps 'tf-keras=={minor}.*'"


def wheel_digest(wheel: Path) -> str:
    """Of the wheel's files, not of the zip: two builds of the same code share layers."""
    import zipfile

    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if not name.endswith(".dist-info/RECORD"):
                h.update(name.encode() + b"\0" + z.read(name))
    return h.hexdigest()


def _wheel_requirements(wheel: Path) -> list[str]:
    """Requires-Dist of the tfhelm wheel without extras: the CLI layer's pip arguments."""
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    return sorted(line.split(":", 1)[1].strip() for line in lines
                  if line.startswith("Requires-Dist:") and "extra ==" not in line)


def _quoted(args: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(x) for x in args)


if __name__ == "__main__":
    main()
