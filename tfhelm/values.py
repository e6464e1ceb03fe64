"""Options -> chart values. Pure: no cluster, no helm."""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from tfhelm import spec
from tfhelm.chart import deep_merge, default_values
from tfhelm.spec import SpecError, Shape


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
    value_files: list[dict] = field(default_factory=list)  # parsed -f files, in order
    sets: list[str] = field(default_factory=list)  # --set k=v, in order


def generate_name() -> str:
    """A short random cluster name, e.g. `tf-k3x9q` (made here, never in a template)."""
    alphabet = string.ascii_lowercase + string.digits
    return "tf-" + "".join(secrets.choice(alphabet) for _ in range(5))


def compute_values(opts: ClusterOptions) -> dict:
    """The values both releases of the cluster get (they differ only in `components`).

    Precedence, lowest first: -f files, --set, then the explicit options.
    """
    values: dict = {}
    for doc in opts.value_files:
        values = deep_merge(values, doc)
    for item in opts.sets:
        values = deep_merge(values, parse_set(item))
    values = deep_merge(values, _option_values(opts))
    values["clusterName"] = opts.name
    values.pop("components", None)
    shape_of(values).validate()
    spec.validate_name(opts.name)
    return values


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
    return v


def split_image(ref: str) -> dict:
    """`registry:5000/team/tf:2.21` -> repository + tag; a digest stays in the repository."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-/:@]*", ref):
        raise SpecError("--image", f"'{ref}' is not an image reference", "e.g. tensorflow/tensorflow:2.21.0")
    if "@" in ref:
        return {"repository": ref, "tag": ""}
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:  # no tag, or the colon was a registry port
        return {"repository": ref, "tag": "latest"}
    return {"repository": repo, "tag": tag}


INLINE_MAX_BYTES = 768 * 1024  # a ConfigMap holds 1 MiB; leave room for the rest of the release


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
        # The .py files beside it go along: the modules a script imports usually sit there.
        extra = {p.name: p.read_text() for p in sorted(local.parent.glob("*.py")) if p != local}
        size = len(local.read_bytes()) + sum(len(t.encode()) for t in extra.values())
        if size > INLINE_MAX_BYTES:
            raise SpecError("--script", f"{local.parent} holds {size} bytes of .py files, over the "
                            f"{INLINE_MAX_BYTES} that fit in a ConfigMap",
                            "serve the code over http(s) or bake it into the image")
        return {"source": "inline", "script": local.name, "inline": local.read_text(), "extraFiles": extra}
    if script.startswith("/"):
        return {"source": "image", "script": script}
    raise SpecError("--script", f"'{script}' is not a local file",
                    "give an http(s) URL, a local file, or an absolute path inside the image")


def shape_of(values: dict) -> Shape:
    v = deep_merge(default_values(), values)
    return Shape(workers=int(v["worker"]["replicas"]), ps=int(v["ps"]["replicas"]),
                 chief=bool(v["chief"]["enabled"]), evaluator=bool(v["evaluator"]["enabled"]))


# --- --set parsing: the subset of Helm's strvals that people use ---------------------

_KEY = re.compile(r"([A-Za-z0-9_\-./]+?)(?:\[(\d+)\])?")


def parse_set(expr: str) -> dict:
    """`a.b=1,c[0]=x` -> {"a": {"b": 1}, "c": ["x"]}; values typed like Helm (int, bool, null)."""
    out: dict = {}
    for part in _split_commas(expr):
        key, eq, raw = part.partition("=")
        if not eq or not key:
            raise SpecError("--set", f"'{part}' is not KEY=VALUE", "e.g. --set worker.replicas=4")
        path = [seg.replace("\\.", ".") for seg in re.split(r"(?<!\\)\.", key)]  # `a\.b` is one key
        _assign(out, path, _typed(raw), part)
    return out


def _split_commas(expr: str) -> list[str]:
    parts, cur, escaped = [], "", False
    for ch in expr:
        if escaped:  # `\,` is a comma in a value; other escapes (`\.` in keys) stay
            cur, escaped = cur + (ch if ch == "," else "\\" + ch), False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def _typed(raw: str):
    if raw in ("true", "false"):
        return raw == "true"
    if raw == "null":
        return None
    if re.fullmatch(r"-?[1-9]\d*|0", raw):
        return int(raw)
    return raw


def _assign(node: dict, path: list[str], value, part: str) -> None:
    for depth, segment in enumerate(path):
        m = _KEY.fullmatch(segment)
        if not m:
            raise SpecError("--set", f"'{part}' has a bad key segment '{segment}'")
        key, idx = m.group(1), m.group(2)
        last = depth == len(path) - 1
        if idx is None:
            if last:
                node[key] = value
            else:
                node = node.setdefault(key, {})
            continue
        lst = node.setdefault(key, [])
        i = int(idx)
        lst.extend([None] * (i + 1 - len(lst)))
        if last:
            lst[i] = value
        else:
            lst[i] = lst[i] if isinstance(lst[i], dict) else {}
            node = lst[i]
