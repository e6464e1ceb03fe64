"""The package's imports go one way (docs/ARCHITECTURE.md): the CLI -> its commands -> the
domains (workspace and reaper build on cluster, never the reverse) -> the two doors (helm.py,
kube.py) and the shared modules; no cycle, lazy imports included. And only the doors talk
to Helm and to the API server."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tfhelm"
DOMAINS = {"cluster": 0, "workspace": 1, "reaper": 1}  # a domain imports only lower ones


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "charts" in parts:
            continue
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = ast.parse(path.read_text())
    return found


def imports(mods: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in its body."""
    def resolve(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, tree in mods.items():
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps |= {resolve(a.name) for a in node.names if a.name.split(".")[0] == "tfhelm"}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tfhelm":
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else resolve(node.module)
                         for a in node.names}
        graph[name] = deps - {name, ""}
    return graph


def layer(module: str) -> tuple[int, str]:
    part = module.split(".")[1] if "." in module else ""
    if module in ("tfhelm.cli", "tfhelm.__main__"):
        return 4, "cli"
    if part == "commands":
        return 3, part
    if part in DOMAINS:
        return 2, part
    return 1, "shared"


def test_imports_go_one_way_without_cycles():
    graph = imports(modules())
    upward = []
    for module, deps in graph.items():
        (mine, home) = layer(module)
        for dep in deps:
            (theirs, where) = layer(dep)
            if theirs > mine or (theirs == mine == 2 and where != home and DOMAINS[where] >= DOMAINS[home]) or (
                    theirs == mine == 3 and dep not in ("tfhelm.commands", "tfhelm.commands.options")):
                upward.append(f"{module} -> {dep}")
    assert not upward, upward
    # No cycle: take away the modules that import nothing left, until none are left.
    left = {m: set(d) for m, d in graph.items()}
    while left:
        leaves = {m for m, d in left.items() if not d & left.keys()}
        assert leaves, f"an import cycle among {sorted(left)}"
        for m in leaves:
            del left[m]


def test_only_the_doors_talk_to_helm_and_to_the_api_server():
    doors = {"tfhelm.helm": {"subprocess", "pyhelm3"}, "tfhelm.kube": {"kubernetes"}}
    # Beside the doors: the launcher and local runs start processes (not Helm); errors.py
    # reads the client's exception types, workspace.rules its quantity parser.
    allowed = {("tfhelm.launcher", "subprocess"), ("tfhelm.cluster.localrun", "subprocess"),
               ("tfhelm.errors", "kubernetes"), ("tfhelm.workspace.rules", "kubernetes"),
               ("tfhelm.commands.cluster", "subprocess")}
    found = []
    for module, tree in modules().items():
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = name.split(".")[0]
                if top in ("subprocess", "pyhelm3", "kubernetes") and top not in doors.get(module, ()) \
                        and (module, top) not in allowed:
                    found.append(f"{module} imports {name}")
    assert not found, found


def test_the_cli_starts_without_the_kubernetes_client_or_pyhelm3():
    """`tfhelm --help` and the offline commands pay for neither: a command imports them when
    it runs (the kubernetes client alone took 0.2 s of the 0.3 s `import tfhelm.cli` had
    grown to when `reap` imported the reaper at startup)."""
    import subprocess
    import sys

    code = "import sys, tfhelm.cli; print(sorted({m.split('.')[0] for m in sys.modules} & {'kubernetes', 'pyhelm3', 'pydantic'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
