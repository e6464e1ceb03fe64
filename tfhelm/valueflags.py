"""The chart values a user gives on the command line: `-f` files, loaded safely, and
`--set`, `--set-string`, `--set-json`, merged by Helm itself.

Helm's `--set` grammar (list indexes into a list from a `-f` file, `{a,b}` lists, escapes,
typing of `1`/`true`/`null`) and its precedence (files, then every --set-json, then --set,
then --set-string, whatever the order on the command line) are Helm's code; rather than keep
a copy that drifts, tfhelm asks the same helm binary it installs with to merge them
(`Helm.merge_values`). The files' content travels on stdin; the --set expressions are the
user's own command line, passed on as they came.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from tfhelm.chart import deep_merge
from tfhelm.errors import SpecError

if TYPE_CHECKING:
    from tfhelm.helm import Helm

MAX_FILE_BYTES = 4 * 2**20  # far above any real values file; a release holds 1 MiB
# Values after YAML aliases are expanded: a "billion laughs" file is a few lines that
# expand to billions; real values files have hundreds or thousands.
MAX_NODES = 200_000


@dataclass
class SetFlags:
    """--set, --set-string and --set-json, each in command-line order."""

    set: list[str] = field(default_factory=list)
    set_string: list[str] = field(default_factory=list)
    set_json: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.set or self.set_string or self.set_json)

    def check(self) -> None:
        """Each --set-json is KEY=JSON[,KEY=JSON...] or one JSON object (Helm's grammar): else a
        SpecError that says what is wrong where, rather than Helm's bare "failed parsing
        --set-json data"."""
        decoder = json.JSONDecoder()
        for item in self.set_json:
            if item.lstrip().startswith("{"):  # the object form: {"worker": {"replicas": 2}}
                try:
                    json.loads(item)
                except json.JSONDecodeError as e:
                    raise SpecError("--set-json", f"'{item}' is not a JSON object ({e.msg} at character "
                                    f"{e.pos + 1})") from None
                continue
            rest = item
            while True:
                key, sep, rest = rest.partition("=")
                if not sep or not key:
                    raise SpecError("--set-json", f"'{item}' is not KEY=JSON",
                                    """e.g. --set-json 'worker.env=[{"name": "A", "value": "1"}]'""")
                try:
                    _, end = decoder.raw_decode(rest)
                except json.JSONDecodeError as e:
                    raise SpecError("--set-json", f"'{item}': the value of {key} is not JSON ({e.msg} at "
                                    f"character {e.pos + 1})", "strings in double quotes, the whole flag in "
                                    "single quotes for the shell") from None
                rest = rest[end:]
                if not rest:
                    break
                if not rest.startswith(","):
                    raise SpecError("--set-json", f"'{item}': {rest[:20]!r} follows the JSON value of {key}",
                                    "separate KEY=JSON pairs with a comma, or give one per --set-json")
                rest = rest[1:]

    def argv(self) -> list[str]:
        return ([a for v in self.set_json for a in ("--set-json", v)]
                + [a for v in self.set for a in ("--set", v)]
                + [a for v in self.set_string for a in ("--set-string", v)])


def load_file(path: Path, flag: str = "--values") -> dict:
    """One values file: a YAML mapping of at most MAX_FILE_BYTES, UTF-8, without an
    alias expansion bomb; anything else is one SpecError naming the file."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise SpecError(flag, f"cannot read {path}: {e.strerror or e}") from e
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(flag, f"{path} is over {MAX_FILE_BYTES // 2**20} MiB",
                        "a values file holds settings; ship large files in the image or a volume")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(flag, f"{path} is not UTF-8 text (byte {e.start})", "save it as UTF-8") from e
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        raise SpecError(flag, f"{path} is not valid YAML{at}: {getattr(e, 'problem', None) or e}") from e
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise SpecError(flag, f"{path} is not a YAML mapping of chart values",
                        "write it as `key: value` lines, e.g. `worker: {replicas: 4}`")
    if count_nodes(doc, MAX_NODES) > MAX_NODES:
        raise SpecError(flag, f"{path} expands to more than {MAX_NODES} values (YAML aliases "
                        "referring to aliases?)", "write the values out without nested aliases")
    return doc


def count_nodes(doc, budget: int) -> int:
    """Nodes of `doc` as a tree (an alias counts each time it is used); stops past budget,
    so a bomb or a self-referencing alias costs at most `budget` steps."""
    seen, stack = 0, [doc]
    while stack and seen <= budget:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return seen


def merge(files: list[dict], sets: SetFlags, helm: Helm | None = None) -> dict:
    """The user's values: files merged in order, then the --set flags applied by Helm (a
    Helm made here when none is given and there are flags)."""
    values: dict = {}
    for doc in files:
        values = deep_merge(values, doc)
    if not sets:
        return values
    sets.check()
    if helm is None:
        from tfhelm.helm import Helm

        helm = Helm()
    return helm.merge_values(values, sets.argv())
