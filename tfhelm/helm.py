"""Helm, through pyhelm3's command layer, behind a synchronous facade.

pyhelm3 is async; its coroutines and their event loop stay in this module, so the rest of
tfhelm makes plain calls. Independent Helm runs (the two releases of a cluster, the
releases a lookup names) run concurrently inside one call. Values always travel on stdin,
never on the command line. Rendered manifests are parsed here, once, with the C YAML loader.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tfhelm import releases, yamlio
from tfhelm.chart import chart_path
from tfhelm.errors import ReleaseError, RenderError, TfhelmError, UsageError, one_line

_LOG_LINE = re.compile(r"^(level=\w+ |time=|WARNING: )", re.M)
# Boilerplate around the reason in Helm's messages.
_NOISE = [re.compile(p) for p in (
    r"^Error: ", r" ?Use --debug flag to render out invalid YAML", r"execution error at \([^)]*\): ",
    r"values don't meet the specifications of the schema\(s\) in the following chart\(s\): [\w-]+: - ")]


# The Helm release tfhelm is tested with; keep in step with HELM_VERSION in mk/versions.mk.
HELM_VERSION = "v4.3.2"


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


def helm_message(err) -> str:
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


HISTORY_MAX = 10  # revisions Helm keeps per release (its own default)
# What a release of tfhelm's charts may hold in its namespace (cluster-scoped objects such as
# tf-cluster's optional StorageClass are never uninstalled by Helm here).
UNINSTALLABLE = frozenset({"Job", "Deployment", "Pod", "PodGroup", "Service", "ConfigMap", "Secret",
                           "NetworkPolicy", "PodMonitor", "PrometheusRule", "PersistentVolumeClaim",
                           "RoleBinding", "Role", "ServiceAccount", "ResourceQuota", "LimitRange", "Ingress"})

# A chart whose one template prints its `.Values`: what Helm makes of values and --set flags.
_ECHO_TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: values}
data:
  values.json: {{ .Values | toJson | toJson }}
"""


@cache
def _echo_chart() -> Path:
    root = Path(tempfile.mkdtemp(prefix="tfhelm-values-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    (root / "templates").mkdir()
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: tfhelm-values\nversion: 0.0.0\n")
    (root / "templates" / "values.yaml").write_text(_ECHO_TEMPLATE)
    return root

# A release in these states is gone or going, as `helm list` (without --all) sees it.
_GONE = {"uninstalled", "uninstalling"}


def _run(coro):
    """Run a coroutine to its end from synchronous code, as asyncio.run does; in a thread of
    its own when this one already runs an event loop (a Jupyter kernel does), where
    asyncio.run would refuse."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="tfhelm-helm") as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class Stored:
    """An installed release: the chart it came from and its user-supplied values."""
    chart: str
    values: dict


class Helm:
    """Synchronous Helm: every method runs Helm and returns its result, or raises a
    RenderError (the chart refused the values) or a ReleaseError (naming the release)."""

    def __init__(self, command=None, timeout: str = "5m"):
        # pyhelm3 imports pydantic models (~0.2 s): only a command that runs Helm pays it.
        from pyhelm3 import Command, errors

        # pyhelm3 logs every failed command; tfhelm reports the failure itself, once.
        logging.getLogger("pyhelm3").setLevel(logging.CRITICAL)
        self._errors = errors
        self.timeout = timeout
        self.command = command or Command(executable=helm_executable(), default_timeout=timeout)

    @staticmethod
    def _all(*coros) -> list:
        """Run coroutines concurrently; the first failure in argument order is raised (the
        same error whichever Helm process ends first)."""
        async def gather():
            return await asyncio.gather(*coros, return_exceptions=True)

        results = _run(gather())
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results

    def template(self, release: str, values: dict, namespace: str,
                 chart: str = "tf-cluster") -> list[dict]:
        return self.templates({release: values}, namespace, chart)[release]

    def templates(self, releases: dict[str, dict], namespace: str,
                  chart: str = "tf-cluster") -> dict[str, list[dict]]:
        """`helm template` of each release (name -> values), concurrently: the objects."""
        rendered = self._all(*(self._template(r, v, namespace, chart) for r, v in releases.items()))
        return dict(zip(releases, rendered))

    async def _template(self, release: str, values: dict, namespace: str, chart: str) -> list[dict]:
        args = ["template", release, chart_path(chart), "--skip-crds", "--values", "-",
                "--namespace", namespace]
        try:
            out = await self.command.run(args, json.dumps(values).encode())
        except self._errors.Error as err:
            raise RenderError(helm_message(err)) from err
        return yamlio.load_docs(out)

    def merge_values(self, values: dict, set_args: list[str]) -> dict:
        """`values` with `--set`, `--set-string` and `--set-json` flags (`set_args`, as on a
        helm command line) applied by Helm itself: its grammar, typing and precedence. The
        values travel on stdin. A flag Helm refuses is a UsageError in Helm's words."""
        args = ["template", "values", str(_echo_chart()), "--values", "-", *set_args]
        try:
            out = _run(self.command.run(args, json.dumps(values).encode()))
        except self._errors.Error as err:
            raise UsageError(one_line(helm_message(err))) from err
        for doc in yamlio.load_docs(out):
            if doc.get("kind") == "ConfigMap":
                merged = json.loads(doc["data"]["values.json"])
                if merged.get("global") == {} and "global" not in values:
                    del merged["global"]  # Helm adds it; not the user's
                return merged
        raise UsageError(f"helm printed no values for {' '.join(set_args)}")

    def install_or_upgrade(self, release: str, values: dict, namespace: str,
                           chart: str = "tf-cluster", wait: bool = True, exists: bool | None = None) -> int:
        """Install or upgrade; no half-made release stays. With wait, Helm waits for the
        objects to be ready and rolls a failure back. Without, it returns once the API
        server accepted every object, and a refused first install is uninstalled here.
        Fields edited by hand since are taken back (server-side apply with force), so drift
        is repaired instead of failing every later upgrade. Returns the new revision.
        `exists`: whether the release exists, when the caller has just read it."""
        return _run(self._install(release, values, namespace, chart, wait, exists))

    def install_all(self, releases: dict[str, tuple[dict, bool]], namespace: str,
                    chart: str = "tf-cluster") -> dict[str, int | ReleaseError]:
        """`install_or_upgrade` (without wait) of each release (name -> (values, exists)), all
        at once; each one's revision, or its ReleaseError."""
        async def each(release, values, exists):
            try:
                return await self._install(release, values, namespace, chart, False, exists)
            except ReleaseError as err:
                return err

        async def gather():
            return await asyncio.gather(*(each(r, v, e) for r, (v, e) in releases.items()))

        return dict(zip(releases, _run(gather())))

    async def _install(self, release: str, values: dict, namespace: str, chart: str, wait: bool,
                       exists: bool | None) -> int:
        if exists is None and not wait:
            exists = await self._read(release, namespace, self.command.get_values(
                release, namespace=namespace)) is not None
        # The API server validates every object strictly (Helm 4 applies with
        # fieldValidation=Strict), so Helm's own OpenAPI check would only fetch the schema.
        args = ["upgrade", release, chart_path(chart), "--install", "--history-max", str(HISTORY_MAX),
                "--output", "json", "--timeout", self.timeout, "--values", "-", "--namespace", namespace,
                "--force-conflicts", "--disable-openapi-validation"]
        args += ["--rollback-on-failure", "--wait", "--wait-for-jobs"] if wait else []
        try:
            out = await self.command.run(args, json.dumps(values).encode())
            return json.loads(out[out.index(b"{"):])["version"]  # after any registry lines
        except self._errors.Error as err:
            if not wait and not exists:
                try:
                    await self.command.uninstall(release, namespace=namespace, wait=False, no_hooks=True)
                except self._errors.Error:
                    pass  # the install's own error is the one to report
            raise ReleaseError(namespace, release, "install", helm_message(err)) from err

    def uninstall(self, release: str, namespace: str, wait: bool = True) -> bool:
        """Uninstall, never running the release's hooks, and only a release whose stored
        manifest keeps to its namespace and the charts' kinds: whoever may write Secrets in the
        namespace may have rewritten the record, and Helm would delete what it names with our
        rights (tfhelm/releases.py; `tfhelm down` deletes by labels instead). False when the
        release was already gone (that is fine)."""
        docs = self.manifest(release, namespace)
        if docs is None:
            return False
        foreign = releases.foreign_objects(docs, namespace, UNINSTALLABLE)
        if foreign:
            raise ReleaseError(namespace, release, "uninstall", f"its record names {', '.join(foreign[:3])}, "
                               "which tfhelm's charts never make there; not uninstalled with Helm "
                               "(`tfhelm down` removes a cluster by its labels)")
        try:
            _run(self.command.uninstall(release, namespace=namespace, wait=wait, no_hooks=True))
            return True
        except self._errors.ReleaseNotFoundError:
            return False
        except self._errors.Error as err:
            raise ReleaseError(namespace, release, "uninstall", helm_message(err)) from err

    def get_values(self, release: str, namespace: str) -> dict | None:
        """The user-supplied values of a release; None when it does not exist."""
        return _run(self._read(release, namespace, self.command.get_values(
            release, namespace=namespace)))

    def manifest(self, release: str, namespace: str) -> list[dict] | None:
        """The objects of an installed release (`helm get manifest`); None when it does not exist."""
        out = _run(self._read(release, namespace, self.command.run(
            ["get", "manifest", release, "--namespace", namespace])))
        return None if out is None else yamlio.load_docs(out)

    def charts(self, namespace: str, releases) -> dict[str, str]:
        """Which of these releases exist, whatever their state (a killed install is
        pending), and the chart each came from (its metadata): {"mnist": "tf-cluster"}."""
        return {r: s.chart for r, s in self.releases(namespace, releases, values=False).items()}

    def releases(self, namespace: str, releases, values: bool = True) -> dict[str, Stored]:
        """The releases of these names that exist (as `charts`), with their user-supplied
        values: every Helm process of the lookup runs at once."""
        releases = list(releases)
        # Reported as before, when this was one `helm list`: "list NAMESPACE/* failed: ...".
        reads = [self._read("*", namespace, self.command.run(
            ["get", "metadata", r, "--namespace", namespace, "--output", "json"]), action="list")
            for r in releases]
        if values:
            reads += [self._read(r, namespace, self.command.get_values(r, namespace=namespace)) for r in releases]
        found = self._all(*reads)
        metadata = [None if m is None else json.loads(m) for m in found[:len(releases)]]
        given = found[len(releases):] or [None] * len(releases)
        return {r: Stored(m["chart"], v or {}) for r, m, v in zip(releases, metadata, given)
                if m is not None and m.get("status") not in _GONE}

    async def _read(self, release: str, namespace: str, call, action: str = "read"):
        """Await a `helm get ...` call; None when the release does not exist."""
        try:
            return await call
        except self._errors.ReleaseNotFoundError:
            return None
        except self._errors.Error as err:
            raise ReleaseError(namespace, release, action, helm_message(err)) from err
