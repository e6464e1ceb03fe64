"""Helm, through pyhelm3. Values always travel on stdin, never on the command line."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
from functools import cache
from pathlib import Path

from pyhelm3 import Client, Command
from pyhelm3 import errors as helm_errors

from tfhelm.chart import chart_path
from tfhelm.errors import ReleaseError, RenderError, TfhelmError

# pyhelm3 logs every failed command; we report the failure ourselves, once.
logging.getLogger("pyhelm3").setLevel(logging.CRITICAL)
_LOG_LINE = re.compile(r"^(level=\w+ |time=|WARNING: )", re.M)
# Boilerplate around the reason in Helm's messages.
_NOISE = [re.compile(p) for p in (
    r"^Error: ", r" ?Use --debug flag to render out invalid YAML", r"execution error at \([^)]*\): ",
    r"values don't meet the specifications of the schema\(s\) in the following chart\(s\): [\w-]+: - ")]


# The Helm release tfhelm is tested with; keep in step with HELM_VERSION in mk/versions.mk.
HELM_VERSION = "v4.3.2"


def run_sync(coro):
    """Run one pyhelm3 coroutine from synchronous code (the CLI, tests)."""
    return asyncio.run(coro)


def helm_executable() -> str:
    """`TFHELM_HELM`, else the repository's `bin/helm` (built by `make helm`), else PATH."""
    candidates = [os.environ.get("TFHELM_HELM"),
                  str(Path(__file__).resolve().parent.parent / "bin" / "helm"), shutil.which("helm")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise TfhelmError("helm not found: install Helm 4 and put it on PATH, or set TFHELM_HELM to it "
                      f"(from source: `go install helm.sh/helm/v4/cmd/helm@{HELM_VERSION}`; "
                      "other ways: https://helm.sh/docs/intro/install/)")


def helm_message(err: helm_errors.Error) -> str:
    """Helm's own reason, without its log lines and `Error:` prefix."""
    return clean_helm_message(err.stderr.decode(errors="replace")) or f"helm exited {err.returncode}"


def clean_helm_message(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not _LOG_LINE.match(ln)]
    text = " ".join(ln.strip() for ln in lines)
    for noise in _NOISE:
        text = noise.sub("", text)
    # Schema paths as value keys: "at '/worker/replicas': " -> "worker.replicas: "
    text = re.sub(r"at '([^']*)': ", lambda m: _value_key(m.group(1)) + ": ", text)
    # A regular expression tells a user little: say what the pattern stands for.
    described = _pattern_descriptions()
    return re.sub(r"does not match pattern '((?:\\.|[^'\\])*)'",
                  lambda m: f"is not {described[m.group(1)]}" if m.group(1) in described else m.group(0), text)


def _value_key(pointer: str) -> str:
    """A JSON pointer as a values key: `/worker/resources/limits/nvidia.com~1gpu` ->
    `worker.resources.limits.nvidia.com/gpu`."""
    keys = [k.replace("~1", "/").replace("~0", "~") for k in pointer.strip("/").split("/")]
    return ".".join(keys) or "values"


@cache
def _pattern_descriptions() -> dict[str, str]:
    """Each schema pattern that has a `description`, as Helm quotes it in its messages."""
    found: dict[str, str] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str) and node.get("description"):
                quoted = node["pattern"].replace("\\", "\\\\").replace("'", "\\'")
                found[quoted] = node["description"]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for chart in ("tf-cluster", "user-env"):
        try:
            walk(json.loads((chart_path(chart) / "values.schema.json").read_text()))
        except (OSError, ValueError):
            pass
    return found


class Helm:
    def __init__(self, command: Command | None = None, timeout: str = "5m"):
        exe = helm_executable()
        self.command = command or Command(executable=exe, default_timeout=timeout)
        self.client = Client(self.command, executable=exe)

    async def template(self, release: str, values: dict, namespace: str,
                       chart: str = "tf-cluster") -> list[dict]:
        try:
            docs = await self.command.template(release, chart_path(chart), values, namespace=namespace)
            return [d for d in docs if d]
        except helm_errors.Error as err:
            raise RenderError(helm_message(err)) from err

    async def install_or_upgrade(self, release: str, values: dict, namespace: str,
                                 chart: str = "tf-cluster", wait: bool = True) -> int:
        """Install or upgrade; no half-made release stays. With wait, Helm waits for the
        objects to be ready and rolls a failure back. Without, it returns once the API
        server accepted every object, and a refused first install is uninstalled here."""
        first = not wait and await self.get_values(release, namespace) is None
        try:
            ref = await self.client.get_chart(chart_path(chart))
            rev = await self.client.install_or_upgrade_release(
                release, ref, values, namespace=namespace, rollback_on_failure=wait, wait=wait,
                create_namespace=False)
            return rev.revision
        except helm_errors.Error as err:
            if first:
                try:
                    await self.uninstall(release, namespace, wait=False)
                except ReleaseError:
                    pass  # the install's own error is the one to report
            raise ReleaseError(namespace, release, "install", helm_message(err)) from err

    async def uninstall(self, release: str, namespace: str, wait: bool = True) -> bool:
        """Uninstall; False when the release was already gone (that is fine)."""
        try:
            await self.command.uninstall(release, namespace=namespace, wait=wait)
            return True
        except helm_errors.ReleaseNotFoundError:
            return False
        except helm_errors.Error as err:
            raise ReleaseError(namespace, release, "uninstall", helm_message(err)) from err

    async def get_values(self, release: str, namespace: str) -> dict | None:
        """The user-supplied values of a release; None when it does not exist."""
        return await self._read(release, namespace, self.command.get_values(release, namespace=namespace), {})

    async def manifest(self, release: str, namespace: str) -> list[dict] | None:
        """The objects of an installed release (`helm get manifest`); None when it does not exist."""
        docs = await self._read(release, namespace, self.command.get_resources(release, namespace=namespace), [])
        return None if docs is None else [d for d in docs if d]

    @staticmethod
    async def _read(release: str, namespace: str, call, empty):
        """Await a `helm get ...` call; None when the release does not exist."""
        try:
            return await call or empty
        except helm_errors.ReleaseNotFoundError:
            return None
        except helm_errors.Error as err:
            if "not found" in err.stderr.decode():
                return None
            raise ReleaseError(namespace, release, "read", helm_message(err)) from err

    async def charts(self, namespace: str) -> dict[str, str]:
        """The namespace's releases, whatever their state (a killed install is pending), and
        the chart each came from: {"mnist": "tf-cluster"}."""
        try:
            releases = await self.command.list(namespace=namespace, include_deployed=True,
                                                include_failed=True, include_pending=True)
        except helm_errors.Error as err:
            raise ReleaseError(namespace, "*", "list", helm_message(err)) from err
        return {r["name"]: r["chart"].rsplit("-", 1)[0] for r in releases}
