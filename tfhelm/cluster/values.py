"""Options (declared in tfhelm/cluster/options.py) -> chart values, and a release's values
normalized once (ClusterValues). Pure: no cluster, no helm."""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from tfhelm import contract
from tfhelm.chart import deep_merge, default_values
from tfhelm.cluster import spec
from tfhelm.cluster.options import ClusterOptions, declared
from tfhelm.cluster.spec import SpecError, Shape


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
    unread = [flag.name for name, flag in declared() if flag.value is None and name != "namespace"
              and getattr(opts, name)]
    if unread:  # a bug, not bad input: they would be ignored
        raise ValueError(f"{', '.join(unread)} must be read into the values first (resolve the options)")
    values: dict = {}
    for doc in opts.value_files:
        values = deep_merge(values, doc)
    options = _option_values(opts)
    _no_lost_values(values, options)
    values = deep_merge(values, options)
    values["clusterName"] = opts.name
    values.pop("components", None)
    normalized = ClusterValues.from_release(values)
    normalized.shape.validate()
    spec.validate_name(opts.name, shape=normalized.shape)
    return normalized


def _no_lost_values(values: dict, options: dict, prefix: str = "") -> None:
    """An option sets a setting inside a map (`--workers`: worker.replicas) that -f or --set
    made something else (`--set worker=3`): the merge would drop that value unseen."""
    for key, value in options.items():
        if isinstance(value, dict) and key in values:
            if not isinstance(values[key], dict):
                inner = f"{prefix}{key}.{next(iter(value), '...')}"
                raise SpecError(prefix + key, f"must be a map of settings, got {values[key]!r}",
                                f"an option sets {inner}; set {prefix}{key}.<setting>=... rather than {prefix}{key}=...")
            _no_lost_values(values[key], value, f"{prefix}{key}.")


def compute_values(opts: ClusterOptions) -> dict:
    """`cluster_values(opts)`, as the dict Helm gets."""
    return cluster_values(opts).user


def _option_values(o: ClusterOptions) -> dict:
    """The chart values the declared options set (tfhelm/cluster/options.py), in their order."""
    v: dict = {}
    for name, flag in declared():
        given = getattr(o, name)
        if flag.value is None or given is None or given == []:
            continue
        value = globals()[flag.convert](given, o, flag.name) if flag.convert else given
        if value is not None:
            _put(v, flag.value, value)
    return v


def _put(values: dict, path: str, value) -> None:
    """Set `a.b.c` in nested dicts; a map given for a key that holds one is merged into it."""
    *parents, key = path.split(".")
    node = values
    for k in parents:
        node = node.setdefault(k, {})
    node[key] = {**node[key], **value} if isinstance(value, dict) and isinstance(node.get(key), dict) else value


# ---------------------------------------------------------------- the options' converters
# Named by the declarations (tfhelm/cluster/options.py): f(value, options, flag) -> chart value.

def non_negative(n: int, o: ClusterOptions, flag: str) -> int:
    if n < 0:
        raise SpecError(flag, f"must be 0 or more, got {n}")
    return n


def graph_mode(in_graph: bool, o: ClusterOptions, flag: str) -> str:
    return "in-graph" if in_graph else "between-graph"


def image_value(ref: str, o: ClusterOptions, flag: str) -> dict | None:
    return split_image(ref) if ref else None


def script_value(script: str, o: ClusterOptions, flag: str) -> dict | None:
    return script_values(script) if script else None


KERAS = ("2", "3", "auto")


def wait_seconds(seconds: float, flag: str = "--timeout") -> float:
    """A wait's bound in seconds: more than 0 (and finite)."""
    if not 0 < seconds < float("inf"):
        raise SpecError(flag, f"must be a number of seconds above 0, got {seconds:g}", "e.g. 600")
    return seconds


def keras_value(keras: str, o: ClusterOptions, flag: str) -> str:
    if keras not in KERAS:
        raise SpecError(flag, f"must be one of {', '.join(KERAS)}, got '{keras}'",
                        "2 for Keras 2 code (tf-keras), 3 for Keras 3")
    return keras


def requirements(packages: list[str], o: ClusterOptions, flag: str) -> list[str]:
    for spec_ in packages:
        if not contract.regex("pipRequirement").fullmatch(spec_):
            raise SpecError(flag, f"'{spec_}' is not a requirement (NAME[EXTRAS][SPECIFIERS], no "
                            "spaces, markers or URLs)", "give one package per --pip, e.g. --pip "
                            "pandas==2.2.3; pip options: --pip-index-url, --pip-find-links")
    return list(packages)


def index_url(url: str, o: ClusterOptions, flag: str) -> str:
    if not o.packages:
        raise SpecError(flag, "needs the packages to install", "add --pip NAME==VERSION")
    if urlparse(url).scheme not in ("http", "https"):
        raise SpecError(flag, f"'{url}' is not an http(s) URL")
    return url


def find_links(url: str, o: ClusterOptions, flag: str) -> str:
    if not o.packages:
        raise SpecError(flag, "needs the packages to install", "add --pip NAME==VERSION")
    if not (url.startswith("/") or urlparse(url).scheme in ("http", "https")):
        raise SpecError(flag, f"'{url}' is neither an http(s) URL nor an absolute path",
                        "e.g. http://files.team-a.svc:8080/wheels/ or /data/wheels")
    return url


def script_arguments(args: list[str], o: ClusterOptions, flag: str) -> list[str]:
    return list(args)


def kueue_name(name: str, o: ClusterOptions, flag: str) -> str:
    """--queue (a LocalQueue), --priority (a WorkloadPriorityClass): a Kueue object's name."""
    if not (spec.DNS1123_SUBDOMAIN.fullmatch(name) and len(name) <= spec.DNS_LABEL_MAX):
        raise SpecError(flag, f"'{name}' is not the name of a Kueue object",
                        "lowercase letters, digits, '-' and '.', at most 63; see `kubectl get "
                        + ("localqueues`" if flag == "--queue" else "workloadpriorityclasses`"))
    return name


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
