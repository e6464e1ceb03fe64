"""`tfhelm run --local`: the chart's topology as processes on this machine.
(One module, over 400 lines: the plan of a local run - pure, tested without processes -
is used only by the process supervisor below it, so the two are read together.)

Every task gets the TF_CONFIG that tfhelm.cluster.spec computes for the chart (the same code the
chart is tested against), with every host mapped to 127.0.0.1 and a free port, and the
environment the chart's contract names, and runs the chart's own copy of the launcher
(tfhelm/pod/launcher.py, as `make chart-files` ships it) in the mode the chart gives it:

- PS tasks, and workers in `--in-graph` mode (the chief drives them): `launcher.py server`;
- workers in `--between-graph` mode (the chart's default), the chief and the evaluator:
  `launcher.py script`.

The run ends by the reaper's rule: once the chief has exited (or, without a chief, every
worker), the servers are stopped; script tasks still running get a grace period to finish.
A training task that fails stops everything. The exit status is the training's.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tfhelm import contract
from tfhelm.cluster import spec, training
from tfhelm.cluster.options import FINISH_GRACE
from tfhelm.errors import UsageError

LAUNCHER = contract.charts_dir().joinpath("tf-cluster", *contract.LIBRARY, "files", "task", "launcher.py")
SERVER, SCRIPT = (contract.task("modes")[m] for m in ("server", "script"))
SERVERS = contract.task("servers")  # the roles that serve, by mode
LOCAL_HOST = "127.0.0.1"
KILL_AFTER = 5.0  # seconds between SIGTERM and SIGKILL

TaskKey = tuple[str, int]


class LocalRunError(UsageError):
    """A local run could not be set up (bad shape, missing script...)."""


# --- the plan (pure) ----------------------------------------------------------------------

@dataclass(frozen=True)
class LocalTask:
    type: str
    index: int
    mode: str  # SERVER or SCRIPT
    tf_config: dict

    @property
    def key(self) -> TaskKey:
        return (self.type, self.index)

    @property
    def name(self) -> str:
        return f"{self.type}-{self.index}"


def task_mode(task_type: str, in_graph: bool) -> str:
    """What a task runs, as in the chart: PS always serve; in-graph workers serve too."""
    return SERVER if task_type in SERVERS["in-graph" if in_graph else "between-graph"] else SCRIPT


def free_ports(count: int, host: str = LOCAL_HOST) -> list[int]:
    """`count` distinct ports free right now (all held open until every one is picked)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def localize(cluster: Mapping[str, list[str]], ports: Iterable[int] | None = None,
             host: str = LOCAL_HOST) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Map every host of `cluster` to `host:<port>`; returns (new cluster, old -> new)."""
    hosts = [h for role in cluster for h in cluster[role]]
    distinct = list(dict.fromkeys(hosts))
    ports = list(ports) if ports is not None else free_ports(len(distinct), host)
    if len(ports) < len(distinct):
        raise LocalRunError(f"{len(distinct)} ports needed, {len(ports)} given")
    mapping = {old: f"{host}:{port}" for old, port in zip(distinct, ports)}
    return {role: [mapping[h] for h in cluster[role]] for role in cluster}, mapping


def localize_tf_configs(tf_configs: Mapping[TaskKey, dict],
                        ports: Iterable[int] | None = None) -> dict[TaskKey, dict]:
    """Every task's TF_CONFIG with hosts mapped to loopback, consistently across tasks."""
    clusters = {spec.dumps(c["cluster"]) for c in tf_configs.values()}
    union: dict[str, list[str]] = {}
    for text in sorted(clusters):
        for role, hosts in json.loads(text).items():
            union.setdefault(role, [])
            union[role] += [h for h in hosts if h not in union[role]]
    _, mapping = localize(union, ports)
    return {key: {"cluster": {r: [mapping[h] for h in hs] for r, hs in c["cluster"].items()},
                  "task": dict(c["task"])}
            for key, c in tf_configs.items()}


def plan(shape: spec.Shape, name: str = "local", in_graph: bool = False,
         ports: Iterable[int] | None = None, namespace: str = "default") -> list[LocalTask]:
    """The tasks of a local run of `shape`, from the chart's own cluster spec."""
    shape.validate()
    if in_graph and not shape.chief:
        raise LocalRunError("--in-graph needs --chief: the chief runs the script and drives the "
                            "worker and PS servers (locally nothing else would)")
    cluster = spec.cluster_spec(name, namespace, shape)
    configs = {key: spec.tf_config(cluster, *key) for key in spec.tasks(shape)}
    local = localize_tf_configs(configs, ports)
    return [LocalTask(t, i, task_mode(t, in_graph), local[(t, i)]) for t, i in spec.tasks(shape)]


def done_condition(tasks: Iterable[LocalTask]) -> list[str]:
    """The tasks whose exit means training is over (the reaper's rule, tfhelm.cluster.training)."""
    tasks = list(tasks)
    role = training.decisive_role({t.type for t in tasks})
    return [t.name for t in tasks if t.type == role]


# --- the run (processes) ------------------------------------------------------------------

@dataclass
class RunDirs:
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def checkpoints(self) -> Path:
        return self.log / "checkpoints"

    @property
    def cluster_file(self) -> Path:
        return self.root / "cluster-spec.json"

    def make(self) -> "RunDirs":
        for d in (self.data, self.log, self.checkpoints):
            d.mkdir(parents=True, exist_ok=True)
        return self


def default_root(name: str, base: Path | None = None) -> Path:
    return (base or Path.cwd()) / ".tfhelm" / "run" / name


@dataclass
class RunResult:
    exit_code: int
    returncodes: dict[str, int | None]  # None: still running when stopped (then killed)
    stopped: list[str] = field(default_factory=list)  # stopped by us (servers, stragglers)
    failed: list[str] = field(default_factory=list)  # training tasks that failed
    completed: bool = False  # the completion condition held
    interrupted: bool = False


def task_env(task: LocalTask, dirs: RunDirs, base_env: Mapping[str, str] | None = None,
             inline_tf_config: bool = True) -> dict[str, str]:
    env = dict(os.environ if base_env is None else base_env)
    names = contract.contract()["env"]
    env.update({
        names["clusterSpecFile"]: str(dirs.cluster_file),
        names["taskType"]: task.type,
        names["taskIndex"]: str(task.index),
        names["dataDir"]: str(dirs.data),
        names["logDir"]: str(dirs.log),
        names["checkpointDir"]: str(dirs.checkpoints),
        "PYTHONUNBUFFERED": "1",
        # The launcher asks the kernel for SIGTERM when we die, even by SIGKILL.
        names["parentPid"]: str(os.getpid()),
    })
    if inline_tf_config:
        env["TF_CONFIG"] = spec.dumps(task.tf_config)
    else:
        env.pop("TF_CONFIG", None)
    return env


def task_argv(task: LocalTask, script: str, args: list[str], python: str = sys.executable,
              launcher: Path = LAUNCHER) -> list[str]:
    """The chart's container command, run with this Python."""
    if task.mode == SERVER:
        return [python, str(launcher), SERVER]
    return [python, str(launcher), SCRIPT, script, *args]


Sink = Callable[[str, str], None]  # (task name, line without newline)


def print_sink(width: int = 0) -> Sink:
    lock = threading.Lock()

    def sink(task: str, line: str) -> None:
        with lock:
            sys.stdout.write(f"[{task}]".ljust(width + 2) + f" {line}\n")
            sys.stdout.flush()
    return sink


class LoopbackCluster:
    """Processes of one local run; each in its own process group, all stopped on exit."""

    def __init__(self, tasks: list[LocalTask], script: str, args: list[str], dirs: RunDirs,
                 sink: Sink | None = None, grace: float = FINISH_GRACE,
                 base_env: Mapping[str, str] | None = None, python: str = sys.executable,
                 inline_tf_config: bool = True, launcher: Path = LAUNCHER):
        self.tasks = tasks
        self.script, self.args = script, list(args)
        self.dirs = dirs
        self.sink = sink or print_sink(max(len(t.name) for t in tasks))
        self.grace = grace
        self.base_env = base_env
        self.python = python
        self.inline_tf_config = inline_tf_config
        self.launcher = launcher
        self.procs: dict[str, subprocess.Popen] = {}
        self._readers: list[threading.Thread] = []
        self._stopped: list[str] = []

    # -- starting
    def start(self) -> None:
        self.dirs.make()
        clusters = [spec.dumps(t.tf_config["cluster"]) for t in self.tasks]
        # An outside chief (a notebook) sees itself in the cluster, the servers don't: fine
        # while TF_CONFIG is inline; the spec file can only hold one cluster.
        if len(set(clusters)) != 1 and not self.inline_tf_config:
            raise LocalRunError("tasks disagree on the cluster spec")
        self.dirs.cluster_file.write_text(clusters[0] + "\n")
        for task in self.tasks:
            self.start_task(task)

    def start_task(self, task: LocalTask) -> subprocess.Popen:
        proc = subprocess.Popen(
            task_argv(task, self.script, self.args, self.python, self.launcher),
            env=task_env(task, self.dirs, self.base_env, self.inline_tf_config),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: we signal the group
        )
        self.procs[task.name] = proc
        reader = threading.Thread(target=self._pump, args=(task.name, proc), daemon=True)
        reader.start()
        self._readers.append(reader)
        return proc

    def _pump(self, name: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            self.sink(name, raw.decode("utf-8", "replace").rstrip("\r\n"))
        proc.stdout.close()

    # -- stopping
    @property
    def stopped(self) -> list[str]:
        """Tasks we stopped (servers, stragglers, everything on failure), in order."""
        return list(dict.fromkeys(self._stopped))

    def signal_task(self, name: str, sig: int) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, names: Iterable[str] | None = None, kill_after: float = KILL_AFTER) -> None:
        """SIGTERM the process groups, then SIGKILL what is left after `kill_after`."""
        names = [n for n in (names if names is not None else self.procs)
                 if self.procs[n].poll() is None]
        for n in names:
            self._stopped.append(n)
            self.signal_task(n, signal.SIGTERM)
        deadline = time.monotonic() + kill_after
        for n in names:
            try:
                self.procs[n].wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.signal_task(n, signal.SIGKILL)
        for n in names:
            self.procs[n].wait()
        # Anything the tasks started in their groups goes too.
        for n in names:
            try:
                os.killpg(self.procs[n].pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        self.stop()
        for r in self._readers:
            r.join(timeout=5)

    def __enter__(self) -> "LoopbackCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the completion rule
    def wait(self, poll: float = 0.2, timeout: float | None = None) -> RunResult:
        """Wait for completion or failure, stop the rest, and return what happened."""
        by_name = {t.name: t for t in self.tasks}
        training = [t.name for t in self.tasks if t.mode == SCRIPT]
        needed = done_condition(self.tasks)
        result = RunResult(exit_code=0, returncodes={})
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            codes = {n: p.poll() for n, p in self.procs.items()}
            failed = [n for n in training if codes[n] not in (None, 0)]
            crashed_servers = [n for n, t in by_name.items()
                               if t.mode == SERVER and codes[n] is not None]
            if failed or crashed_servers:
                result.failed = failed or crashed_servers
                first = (failed or crashed_servers)[0]
                self.sink("tfhelm", f"{first} exited with status {_status(codes[first])}; "
                                    "stopping the others")
                result.exit_code = _exit_code(codes[first]) or 1
                break
            if all(codes[n] is not None for n in needed):
                result.completed = True
                rest = [n for n in training if codes[n] is None]
                if rest:
                    self._wait_for(rest, self.grace)
                    late = [n for n in rest if self.procs[n].poll() not in (None, 0)]
                    if late:
                        result.failed = late
                        result.exit_code = _exit_code(self.procs[late[0]].poll()) or 1
                break
            if deadline is not None and time.monotonic() > deadline:
                self.sink("tfhelm", f"timed out after {timeout:.0f}s; stopping everything")
                result.exit_code = 1
                break
            time.sleep(poll)
        self.stop()
        result.stopped = self.stopped
        result.returncodes = {n: p.returncode for n, p in self.procs.items()}
        for r in self._readers:
            r.join(timeout=5)
        return result

    def _wait_for(self, names: list[str], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(self.procs[n].poll() is None for n in names):
            time.sleep(0.2)


def _status(code: int | None) -> str:
    if code is None:
        return "running"
    return f"{code}" if code >= 0 else f"signal {signal.Signals(-code).name}"


def _exit_code(code: int | None) -> int:
    """A child's returncode as a shell would report it (128+N for signal N)."""
    if code is None:
        return 1
    return code if code >= 0 else 128 - code


def run(tasks: list[LocalTask], script: str, args: list[str], dirs: RunDirs, *,
        sink: Sink | None = None, grace: float = FINISH_GRACE,
        base_env: Mapping[str, str] | None = None, timeout: float | None = None,
        inline_tf_config: bool = True, launcher: Path = LAUNCHER) -> RunResult:
    """Run the tasks to completion; SIGINT/SIGTERM stop everything (exit 130/143)."""
    if not Path(script).is_file():
        raise LocalRunError(f"script {script} does not exist")
    cluster = LoopbackCluster(tasks, str(Path(script).resolve()), args, dirs, sink=sink,
                           grace=grace, base_env=base_env, inline_tf_config=inline_tf_config,
                           launcher=launcher)
    received: list[int] = []
    previous = {}
    on_main = threading.current_thread() is threading.main_thread()

    def on_signal(signum, _frame):
        received.append(signum)
        raise KeyboardInterrupt

    if on_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        cluster.start()
        return cluster.wait(timeout=timeout)
    except KeyboardInterrupt:
        signum = received[0] if received else signal.SIGINT
        cluster.sink("tfhelm", f"{signal.Signals(signum).name}: stopping every task")
        # Further signals must not interrupt the cleanup.
        if on_main:
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
        cluster.close()
        return RunResult(exit_code=128 + signum,
                         returncodes={n: p.returncode for n, p in cluster.procs.items()},
                         stopped=cluster.stopped, interrupted=True)
    finally:
        cluster.stop()
        if on_main:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
