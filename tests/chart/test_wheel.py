"""The wheel as a pip user gets it: built from the repository, installed into a fresh venv
outside it, run from another directory with nothing but Helm on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml

from tfhelm.helm import helm_executable
from tests.helpers.pods import task_tf_configs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv holding only the built wheel; its dependencies come from the test venv
    through a .pth line (no download), to a folder of links to all of them but tfhelm's own
    (the checkout's editable tfhelm, its development package)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # build from a copy: the repository gets no build/ or egg-info
    src.mkdir()
    for item in ("pyproject.toml", "MANIFEST.in", "README.md", "tfhelm", "charts", "examples"):
        copy = shutil.copytree if (REPO / item).is_dir() else shutil.copy2
        kwargs = {"symlinks": True, "ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}
        copy(REPO / item, src / item, **kwargs)
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(dist), str(src)], check=True, capture_output=True)
    wheel = next(dist.glob("tfhelm-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                    "-q", "--no-deps", str(wheel)], check=True, capture_output=True)
    site = subprocess.run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    deps = tmp / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if not entry.name.startswith(("tfhelm", "__editable__")):
            (deps / entry.name).symlink_to(entry)
    Path(site, "test-deps.pth").write_text(f"{deps}\n")
    return venv


def run(venv: Path, *args: str, path: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFHELM_")}
    env.update(PATH=path, KUBECONFIG=str(cwd / "absent"), HOME=str(cwd))
    return subprocess.run([str(venv / "bin" / "tfhelm"), *args], capture_output=True, text=True,
                          cwd=cwd, env=env)


def test_wheel_carries_both_charts_whole(installed):
    """Every file of both charts, byte for byte (hidden ones like .helmignore too)."""
    wheel = next((installed.parent / "dist").glob("tfhelm-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        packed = {n[len("tfhelm/charts/"):]: z.read(n) for n in z.namelist() if n.startswith("tfhelm/charts/")}
    repo = {p.relative_to(REPO / "charts").as_posix(): p.read_bytes()
            for p in (REPO / "charts").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert {"tf-cluster/Chart.yaml", "user-env/.helmignore", "tf-cluster/charts/tf-cluster-lib/files/task/launcher.py"} <= set(repo)
    assert packed == repo


def test_wheel_carries_every_module_of_the_package(installed):
    """Every tfhelm module, subpackages too (pyproject lists each package by name)."""
    wheel = next((installed.parent / "dist").glob("tfhelm-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        packed = {n for n in z.namelist() if n.endswith(".py") and not n.startswith(("tfhelm/charts/", "tfhelm/examples/"))}
    repo = {p.relative_to(REPO).as_posix() for p in (REPO / "tfhelm").rglob("*.py")}
    assert {"tfhelm/workspace/userspec.py", "tfhelm/reaper/loop.py", "tfhelm/api/clusters.py"} <= repo
    assert packed == repo


def test_wheel_carries_the_examples_a_workspace_gets(installed):
    """The example scripts and the API's notebook, as `tfhelm.examples` (the notebook image
    copies them into each workspace's work directory), byte for byte."""
    wheel = next((installed.parent / "dist").glob("tfhelm-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        packed = {n[len("tfhelm/examples/"):]: z.read(n) for n in z.namelist() if n.startswith("tfhelm/examples/")}
    repo = {p.name: p.read_bytes() for p in (REPO / "examples").iterdir()
            if p.is_file() and (p.suffix in (".py", ".ipynb") or p.name == "README.md")}
    assert {"tfhelm_api.ipynb", "ps_between_graph.py", "tfhelm_example.py"} <= set(repo)
    assert packed == repo


def test_installed_cli_renders_a_cluster_from_another_directory(installed, tmp_path):
    helm_dir = tmp_path / "helm-bin"
    helm_dir.mkdir()
    (helm_dir / "helm").symlink_to(helm_executable())
    where = subprocess.run([installed / "bin" / "python", "-c", "import tfhelm.cli; print(tfhelm.cli.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert where.startswith(str(installed)), where  # the wheel's copy, not the repository's
    res = run(installed, "render", "demo", "--workers", "3", "--ps", "1", "-n", "team-a",
              path=f"{helm_dir}:/usr/bin:/bin", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    configs = task_tf_configs([d for d in yaml.safe_load_all(res.stdout) if d])
    assert configs[("worker", 2)]["cluster"]["ps"] == ["demo-ps-0.team-a.svc.cluster.local:2222"]
    users = run(installed, "user", "add", "alice", "--dry-run", path=f"{helm_dir}:/usr/bin:/bin", cwd=tmp_path)
    assert users.returncode == 0, users.stderr
    assert any(d["kind"] == "Namespace" or d["kind"] == "Deployment"
               for d in yaml.safe_load_all(users.stdout) if d)


def test_the_development_cluster_stays_out_of_the_wheel(installed, tmp_path):
    """tfhelm_dev (the local cluster) works only in a checkout: the wheel leaves it out, and with
    it `tfhelm cluster` (a checkout's `make install` registers it)."""
    wheel = next((installed.parent / "dist").glob("tfhelm-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        dev = {"localcluster.py", "localnode.py", "localnet.py", "localimages.py"}
        assert not [n for n in z.namelist() if n.startswith("tfhelm_dev/") or n.rsplit("/", 1)[-1] in dev]
    res = run(installed, "cluster", "status", path="/usr/bin:/bin", cwd=tmp_path)
    assert res.returncode == 2 and "No such command 'cluster'" in res.stderr, res.stderr
    listed = run(installed, "--help", path="/usr/bin:/bin", cwd=tmp_path).stdout
    assert re.search(r"^\W*up\s", listed, re.M) and not re.search(r"^\W*cluster\s", listed, re.M), listed


def test_installed_version_and_python_dash_m(installed, tmp_path):
    res = run(installed, "--version", path="/usr/bin:/bin", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.startswith("tfhelm 0."), res.stderr
    mod = subprocess.run([installed / "bin" / "python", "-m", "tfhelm", "--version"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert mod.stdout == res.stdout


def test_without_helm_one_line_says_how_to_get_it(installed, tmp_path):
    res = run(installed, "render", "demo", "--workers", "1", path="/nonexistent", cwd=tmp_path)
    assert res.returncode == 5, res.stderr  # Helm could not act (the exit-code table, tfhelm/errors.py)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "helm not found" in lines[0] and "go install helm.sh/helm/v4/cmd/helm@v" in lines[0]
    assert "make helm" not in lines[0]
