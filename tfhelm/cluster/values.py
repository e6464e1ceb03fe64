"""Options -> chart values, and a release's values normalized once (ClusterValues). Pure: no
cluster, no helm."""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from tfhelm import contract
from tfhelm.chart import deep_merge, default_values
from tfhelm.cluster import spec
from tfhelm.cluster.spec import SpecError, Shape


@dataclass
class ClusterOptions:
    """What `tfhelm up` was asked for; None means "leave the chart's value"."""

    name: str
    namespace: str = "default"
    workers: int | None = None
    ps: int | None = None
    chief: bool | None = None
    evaluator: bool | None = None
    in_graph: bool | None = None
    image: str | None = None
    script: str | None = None
    script_args: list[str] = field(default_factory=list)
    gpus: int | None = None
    keras: str | None = None  # "2", "3" or "auto"
    packages: list[str] = field(default_factory=list)  # --pip, pip requirement specifiers
    pip_index_url: str | None = None
    pip_find_links: str | None = None
    # The user's chart values, lowest precedence first: -f files, and the result of
    # tfhelm.valueflags.merge() (files and --set* merged by Helm's rules).
    value_files: list[dict] = field(default_factory=list)


def generate_name() -> str:
    """A short random cluster name, e.g. `tf-k3x9q` (made here, never in a template)."""
    alphabet = string.ascii_lowercase + string.digits
    return "tf-" + "".join(secrets.choice(alphabet) for _ in range(5))


def cluster_values(opts: ClusterOptions) -> ClusterValues:
    """The values both releases of the cluster get (they differ only in `components`),
    validated and normalized once.

    Precedence, lowest first: -f files and --set (see tfhelm.valueflags), then the
    explicit options.
    """
    values: dict = {}
    for doc in opts.value_files:
        values = deep_merge(values, doc)
    values = deep_merge(values, _option_values(opts))
    values["clusterName"] = opts.name
    values.pop("components", None)
    normalized = ClusterValues.from_release(values)
    normalized.shape.validate()
    spec.validate_name(opts.name, shape=normalized.shape)
    return normalized


def compute_values(opts: ClusterOptions) -> dict:
    """`cluster_values(opts)`, as the dict Helm gets."""
    return cluster_values(opts).user


def _option_values(o: ClusterOptions) -> dict:
    v: dict = {}
    if o.workers is not None:
        v.setdefault("worker", {})["replicas"] = o.workers
    if o.ps is not None:
        v.setdefault("ps", {})["replicas"] = o.ps
    if o.chief is not None:
        v.setdefault("chief", {})["enabled"] = o.chief
    if o.evaluator is not None:
        v.setdefault("evaluator", {})["enabled"] = o.evaluator
    if o.in_graph is not None:
        v["mode"] = "in-graph" if o.in_graph else "between-graph"
    if o.gpus is not None:
        if o.gpus < 0:
            raise SpecError("--gpus", f"must be 0 or more, got {o.gpus}")
        v.setdefault("worker", {})["gpus"] = o.gpus
    if o.image:
        v["image"] = split_image(o.image)
    if o.script:
        v["code"] = script_values(o.script)
    if o.script_args:
        v.setdefault("code", {})["args"] = list(o.script_args)
    if o.keras is not None:
        if o.keras not in KERAS:
            raise SpecError("--keras", f"must be one of {', '.join(KERAS)}, got '{o.keras}'",
                            "2 for Keras 2 code (tf-keras), 3 for Keras 3")
        v["keras"] = o.keras
    pip = _pip_values(o)
    if pip:
        v["code"] = {**v.get("code", {}), **pip}
    return v


KERAS = ("2", "3", "auto")


def _pip_values(o: ClusterOptions) -> dict:
    """--pip, --pip-index-url, --pip-find-links as the `code` values `packages` and `pip`."""
    code: dict = {}
    for spec_ in o.packages:
        if not spec_.strip() or spec_.startswith("-"):
            raise SpecError("--pip", f"'{spec_}' is not a requirement",
                            "give one package per --pip, e.g. --pip pandas==2.2.3; pip options: "
                            "--pip-index-url, --pip-find-links")
    if o.packages:
        code["packages"] = list(o.packages)
    if (o.pip_index_url or o.pip_find_links) and not o.packages:
        raise SpecError("--pip-index-url" if o.pip_index_url else "--pip-find-links",
                        "needs the packages to install", "add --pip NAME==VERSION")
    if o.pip_index_url:
        if urlparse(o.pip_index_url).scheme not in ("http", "https"):
            raise SpecError("--pip-index-url", f"'{o.pip_index_url}' is not an http(s) URL")
        code.setdefault("pip", {})["indexUrl"] = o.pip_index_url
    if o.pip_find_links:
        if not (o.pip_find_links.startswith("/") or urlparse(o.pip_find_links).scheme in ("http", "https")):
            raise SpecError("--pip-find-links", f"'{o.pip_find_links}' is neither an http(s) URL nor "
                            "an absolute path", "e.g. http://files.team-a.svc:8080/wheels/ or /data/wheels")
        code.setdefault("pip", {})["findLinks"] = o.pip_find_links
    return code


IMAGE_REF = contract.regex("imageReference")


def split_image(ref: str) -> dict:
    """`registry:5000/team/tf:2.21` -> repository + tag; a digest stays in the repository."""
    if not IMAGE_REF.fullmatch(ref):
        raise SpecError("--image", f"'{ref}' is not an image reference", "e.g. tensorflow/tensorflow:2.21.0")
    if "@" in ref:
        return {"repository": ref, "tag": ""}
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:  # no tag, or the colon was a registry port
        return {"repository": ref, "tag": "latest"}
    return {"repository": repo, "tag": tag}


INLINE_MAX_BYTES = contract.limit("inlineCodeBytes")


def script_values(script: str, local_root: Path | None = None) -> dict:
    """--script: an http(s) URL, a local file (shipped in the release with the .py files
    beside it), or a path in the image."""
    parsed = urlparse(script)
    if parsed.scheme in ("http", "https"):
        if not parsed.netloc or not Path(parsed.path).name:
            raise SpecError("--script", f"'{script}' does not name a file", "e.g. http://files.team-a/train.py")
        return {"source": "url", "url": script, "script": Path(parsed.path).name}
    if "://" in script:
        raise SpecError("--script", f"'{script}' is not an http(s) URL",
                        "serve the script over http(s), give a local file, or a path inside the image")
    local = (local_root or Path.cwd()) / script
    if local.is_file():
        if not is_configmap_key(local.name):
            raise SpecError("--script", f"'{local.name}' cannot be a ConfigMap key (the script is "
                            "shipped in one)", "rename it to letters, digits, '-', '_' and '.'")
        # The .py files beside it go along: the modules a script imports usually sit there
        # (a name that is no ConfigMap key is no importable module either: left out).
        extra = {p.name: _text(p) for p in sorted(local.parent.glob("*.py"))
                 if p != local and is_configmap_key(p.name)}
        size = len(local.read_bytes()) + sum(len(t.encode()) for t in extra.values())
        if size > INLINE_MAX_BYTES:
            raise SpecError("--script", f"{local.parent} holds {size} bytes of .py files, over the "
                            f"{INLINE_MAX_BYTES} that fit in a ConfigMap",
                            "serve the code over http(s) or bake it into the image")
        return {"source": "inline", "script": local.name, "inline": _text(local), "extraFiles": extra}
    if script.startswith("/"):
        return {"source": "image", "script": script}
    raise SpecError("--script", f"'{script}' is not a local file",
                    "give an http(s) URL, a local file, or an absolute path inside the image")


def is_configmap_key(name: str) -> bool:
    return bool(contract.regex("configMapKey").fullmatch(name)) and len(name) <= contract.limit("configMapKey")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError("--script", f"{path} is not UTF-8 text (byte {e.start})",
                        "save it as UTF-8, or move it out of the script's directory") from e


@dataclass(frozen=True)
class ClusterValues:
    """A tf-cluster release's values, normalized once: what the user gave (what Helm gets)
    and the chart's defaults coalesced under it (what the templates see), with the settings
    tfhelm reads from them. Treat both dicts as read-only."""

    user: dict
    effective: dict
    shape: Shape

    @classmethod
    def from_release(cls, user_values: dict) -> ClusterValues:
        """From the user's values (a release's, or computed): one merge with the defaults."""
        effective = deep_merge(default_values(), user_values, over_defaults=True)
        shape = Shape(workers=_setting(effective, "worker.replicas", int),
                      ps=_setting(effective, "ps.replicas", int),
                      chief=_setting(effective, "chief.enabled", bool),
                      evaluator=_setting(effective, "evaluator.enabled", bool))
        return cls(user_values, effective, shape)

    @property
    def name(self) -> str | None:
        """`clusterName` (None: the chart names the cluster after the release)."""
        return self.effective.get("clusterName") or None

    def setting(self, path: str, kind: type):
        """The value at a dotted path such as `worker.replicas` (see `setting`)."""
        return _setting(self.effective, path, kind)


def setting(values: dict, path: str, kind: type):
    """The value at `worker.replicas` (defaults coalesced), or a SpecError naming the key:
    so a mistyped value is one line here, before the chart's schema sees it."""
    return ClusterValues.from_release(values).setting(path, kind)


def shape_of(values: dict) -> Shape:
    return ClusterValues.from_release(values).shape


def _setting(effective: dict, path: str, kind: type):
    node, keys = effective, path.split(".")
    for depth, key in enumerate(keys):
        if not isinstance(node, dict):
            where = ".".join(keys[:depth])
            raise SpecError(where, f"must be a map of settings, got {node!r}",
                            f"set {path}=... rather than {where}=...")
        if key not in node:
            raise SpecError(path, "is missing (a null value removed the chart's default)",
                            "give a value or leave it out")
        node = node[key]
    if kind is int and isinstance(node, float) and node.is_integer():
        node = int(node)
    if not isinstance(node, kind) or (kind is int and isinstance(node, bool)):
        want = {int: "an integer", bool: "true or false", str: "a string"}[kind]
        raise SpecError(path, f"must be {want}, got {node!r}")
    return node
