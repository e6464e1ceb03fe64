"""The package's imports go one way (docs/ARCHITECTURE.md): the CLI -> its commands -> the
Python API (tfhelm.api, and the package's front door `tfhelm`) -> the domains (workspace and
reaper build on cluster, never the reverse) -> the two doors (helm.py; kube.py with
kuberest.py, kubeconfig.py and watches.py) and the shared modules, tfhelm.pod (the pods'
programs) among them; no cycle, lazy imports included. Only the doors talk to Helm and to
the API server (the pods have their own, tfhelm.pod.apiserver), the commands reach them
only through the Python API, and what the charts ship to pods imports the standard library
alone."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tfhelm"
DOMAINS = {"cluster": 0, "workspace": 1, "reaper": 1}  # a domain imports only lower ones


# The Kubernetes door: Kube, the requests by kind it builds on, the kubeconfig, the watches.
KUBE_DOOR = ("tfhelm.kube", "tfhelm.kuberest", "tfhelm.kubeconfig", "tfhelm.watches")


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
        return 5, "cli"
    if part == "commands":
        return 4, part
    if part == "api" or module == "tfhelm":
        return 3, "api"
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
                    theirs == mine == 4 and dep not in ("tfhelm.commands", "tfhelm.commands.options")):
                upward.append(f"{module} -> {dep}")
    assert not upward, upward
    # No cycle: take away the modules that import nothing left, until none are left.
    left = {m: set(d) for m, d in graph.items()}
    while left:
        leaves = {m for m, d in left.items() if not d & left.keys()}
        assert leaves, f"an import cycle among {sorted(left)}"
        for m in leaves:
            del left[m]


# The repository's floors: what ships (tfhelm) <- the development cluster (tfhelm_dev) and the
# scripts that make the charts' files (hack) <- the benches and the tests.
FLOORS = {"tfhelm": 0, "tfhelm_dev": 1, "hack": 1, "bench": 2, "tests": 2}


def repository_imports() -> dict[str, set[str]]:
    """Each Python file of the repository (by its path) -> the floors it imports from, lazy
    imports included; a bench's `import peerlib` (bench/ on its path) is the bench floor."""
    repo = PACKAGE.parent
    found = {}
    for floor in FLOORS:
        for path in sorted((repo / floor).rglob("*.py")):
            if "charts" in path.relative_to(repo).parts:
                continue
            siblings = {p.stem for p in path.parent.glob("*.py")}
            tops = set()
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                         else [])
                for name in names:
                    top = name.split(".")[0]
                    tops.add(top if top in FLOORS else floor if top in siblings else "")
            found[str(path.relative_to(repo))] = tops - {""}
    return found


def test_the_repository_imports_downward_only():
    """The wheel's package imports nothing of the checkout's (the development cluster, the
    benches, the scripts, the tests); the development cluster nothing of the benches or tests.
    (`tfhelm cluster` is the development cluster's command, registered by `make install`.)"""
    found = repository_imports()
    assert {"tfhelm/cli.py", "tfhelm_dev/command.py", "bench/peer.py", "tests/unit/test_imports.py"} <= found.keys()
    upward = sorted(f"{path} -> {top}" for path, tops in found.items() for top in tops
                    if FLOORS[top] > FLOORS[path.split("/")[0]])
    assert not upward, upward
    assert "tfhelm" in found["tfhelm_dev/command.py"] and "tfhelm_dev" in found["bench/peer.py"]


def test_only_the_doors_talk_to_helm_and_to_the_api_server():
    doors = {"tfhelm.helm": {"subprocess", "pyhelm3"}, **{door: {"kubernetes"} for door in KUBE_DOOR}}
    # Beside the doors: the launcher and local runs start processes (not Helm); errors.py
    # reads the client's exception types, workspace.userspec its quantity parser.
    allowed = {("tfhelm.pod.packages", "subprocess"), ("tfhelm.cluster.localrun", "subprocess"),
               ("tfhelm.apierrors", "kubernetes"), ("tfhelm.workspace.userspec", "kubernetes")}
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

    code = ("import sys, tfhelm.cli; print(sorted(({m.split('.')[0] for m in sys.modules} | set(sys.modules)) & "
            "{'kubernetes', 'pyhelm3', 'pydantic', 'tfhelm.cluster.localrun', 'tfhelm.api'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out  # nor the local runner or the API (run --local, up)


DOORS = {"tfhelm.helm", *KUBE_DOOR}


def test_no_command_talks_to_helm_or_the_api_server_itself():
    """A command module reads options and prints: what it asks of Helm or the API server goes
    through tfhelm.api (the same core `tfhelm.up()` is). No path of imports from a command
    reaches a door (tfhelm/helm.py, tfhelm/kube.py) but through tfhelm.api; imports made for
    type checking only do not count, lazy imports do."""
    mods = modules()
    graph = imports({m: _without_type_checking(t) for m, t in mods.items()})
    found = []
    for command in (m for m in graph if layer(m) == (4, "commands")):
        seen, stack = {command}, [(command, [command])]
        while stack:
            module, path = stack.pop()
            for dep in graph[module]:
                if dep in seen or layer(dep)[1] == "api":
                    continue
                seen.add(dep)
                if dep in DOORS:
                    found.append(" -> ".join([*path, dep]))
                stack.append((dep, [*path, dep]))
    assert not found, found
    assert "tfhelm.api.clusters" in {d for m in graph for d in graph[m] if layer(m)[1] == "commands"}, \
        "the commands call the API"


def _without_type_checking(tree: ast.Module) -> ast.Module:
    """The module without its `if TYPE_CHECKING:` blocks."""
    class Drop(ast.NodeTransformer):
        def visit_If(self, node):
            test = node.test
            if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                return node.orelse or None
            return self.generic_visit(node)
    return Drop().visit(ast.parse(ast.unparse(tree)))
    

def _chart_files():
    import importlib.util

    spec = importlib.util.spec_from_file_location("chart_files", PACKAGE.parent / "hack" / "chart-files.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_what_the_charts_ship_to_pods_imports_the_standard_library_alone():
    """Every module of tfhelm.pod, and what the programs pods run import (tfhelm.contract, the
    reaper's loop and rules, the training rule): the standard library and each other only,
    lazy imports included (hack/chart-files.py refuses anything else)."""
    chart_files = _chart_files()
    pod = sorted(m for m in modules() if m.startswith("tfhelm.pod.") and not m.endswith("__init__"))
    shipped = set(chart_files.closure(pod))
    for entries in chart_files.PROGRAMS.values():
        shipped |= set(chart_files.closure(list(entries.values())))
    assert set(pod) <= shipped
    assert {"tfhelm.contract", "tfhelm.reaper.rules", "tfhelm.reaper.loop", "tfhelm.cluster.training"} <= shipped
    graph = imports(modules())
    for module in shipped:
        assert graph[module] <= shipped | {"tfhelm.pod", "tfhelm.reaper", "tfhelm.cluster"}, module


def test_the_cli_imports_from_the_pods_programs_only_what_it_needs():
    """`import tfhelm.cli` loads none of the launcher's modes (server, supervision, pip, event
    files, metrics): they are the pods'."""
    import subprocess
    import sys

    code = "import sys, tfhelm.cli; print(sorted(m for m in sys.modules if m.startswith('tfhelm.pod')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert set(eval(out)) <= {"tfhelm.pod", "tfhelm.pod.tfconfig"}, out


def test_the_kubernetes_door_answers_in_the_apis_json():
    """Kube returns one shape, plain dicts: reading JSON like a client model (JsonObject) is
    the domains' business, and so is which objects are a TF cluster's (cluster/objects.py)."""
    graph = imports(modules())
    assert not [(door, dep) for door in KUBE_DOOR for dep in graph[door]
                if dep in ("tfhelm.jsonobject", "tfhelm.cluster", "tfhelm.cluster.objects")]
    assert "tfhelm.jsonobject" in graph["tfhelm.cluster.objects"]
