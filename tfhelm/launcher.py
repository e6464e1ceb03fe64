"""Entrypoint of every TensorFlow task that tfhelm starts, in a pod or on this machine.
(One module, over 700 lines: the chart mounts this one file into stock images, which run it
with the standard library alone.)

    python launcher.py server                 # PS tasks; workers driven by a chief (in-graph)
    python launcher.py script PATH [ARGS...]  # workers (between-graph), chief, evaluator
    python launcher.py exec [--] CMD [ARGS...]  # a role's own `command`, with TF_CONFIG set
    python launcher.py tfconfig               # print this task's TF_CONFIG (kubectl exec)
    python launcher.py packages DIR [PIP OPTIONS...] -- REQUIREMENT...  # a run's extra packages

The chart mounts this program from a ConfigMap (its copy, charts/tf-cluster/charts/tf-cluster-lib/files/launcher.py,
is this file without docstrings and comments: `make chart-files`; so the chart alone is
complete) and `tfhelm run --local` runs this file, so it must stay importable with the
standard library alone: stock TensorFlow images have no tfhelm installed. TensorFlow is
imported lazily, and only by `server` mode.

Pods carry no TF_CONFIG: it lists every task, so it grows with the cluster, and so would
every pod template. They get the cluster spec file (TFHELM_CLUSTER_SPEC_FILE: per role a
host pattern and a count, the same few hundred bytes at any size) plus TFHELM_TASK_TYPE /
TFHELM_TASK_INDEX; the launcher expands them into TF_CONFIG (expand_cluster, the one
expansion tfhelm itself uses too) and puts it into os.environ, so TensorFlow's cluster
resolvers and the user's script find it where they always look. `script` mode runs the
script with runpy (in a forked child of this process) instead of exec'ing it: a TF_CONFIG
larger than Linux's 128 KiB per environment string never passes through execve. `exec` mode
must pass it through execve, and says so when it would not fit.

The launcher is the container's PID 1, and the kernel gives PID 1 no default action for
SIGTERM: a script that installs no handler would ignore the kubelet's SIGTERM and die only
by SIGKILL at the end of the grace period (30 s), while the next task of the same index
waits, or starts beside it. So `script` and `exec` modes fork (`supervise`): the child, not
PID 1, runs the script or execs the command, and SIGTERM stops it; this process forwards
SIGTERM and SIGINT to it, reaps it and exits with its status (128 + N for signal N). It also
tells Kubernetes why a task failed, in one line (the termination message that `tfhelm
status` shows), and exits 75 for the TensorFlow errors a restart can cure (a peer that went
away), so the Job's podFailurePolicy retries those and fails a task at once on any other
error of the script (`failure_exit`).

With TFHELM_METRICS_PORT set (the chart's `metrics.enabled`), the launcher (PID 1, never the
script's child) serves Prometheus text on that port in every mode: the task's up, start time
and restarts, and on the cluster's first task (chief 0, else worker 0) the training's
progress, read from the TensorBoard event files the script already writes under
TFHELM_LOG_DIR (`Progress`: TFRecord framing and the Event protobuf parsed here, since
the launcher has the standard library only). The user's script changes in nothing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import runpy
import signal
import struct
import sys
import threading
import time
import traceback

USAGE = ("usage: launcher.py server | launcher.py script PATH [ARGS...] | "
         "launcher.py exec [--] CMD [ARGS...] | launcher.py tfconfig | "
         "launcher.py packages DIR [PIP OPTIONS...] -- REQUIREMENT...")
ROLES = ("chief", "worker", "ps", "evaluator")
EXIT_USAGE = 2
EXIT_NOT_FOUND = 127  # as a shell reports a command it cannot run
# A failure a restart can cure (sysexits' EX_TEMPFAIL): the chart's podFailurePolicy retries
# it (`failurePolicy.retryExitCodes`), as it retries 137 (SIGKILL, e.g. out of memory) and
# 143 (SIGTERM), and fails a task at once on any other non-zero exit.
EXIT_RETRY = 75
# Uncaught exceptions (by class name, the class or a base) that mean a peer went away, not
# a bug in the script; the chart sets TFHELM_RETRY_ERRORS from `failurePolicy.retryErrors`.
RETRY_ERRORS = "UnavailableError,AbortedError,DeadlineExceededError,CancelledError"
# Where the chart wants the one-line reason of a failure (the container's
# terminationMessagePath); unset (a local run), nothing is written.
TERMINATION_LOG_ENV = "TFHELM_TERMINATION_LOG"
MESSAGE_MAX = 1024  # characters; Kubernetes keeps 4096 bytes of a termination message
INDEX = "{index}"  # where a role's host pattern takes the task index
# Linux's MAX_ARG_STRLEN: one environment string (NAME=value and its NUL) is at most 32 pages.
ENV_STRING_MAX = 128 * 1024
# The chart sets it when `metrics.enabled`; unset (a local run), no port is opened.
METRICS_PORT_ENV = "TFHELM_METRICS_PORT"
# `json`: the launcher's own lines are JSON objects (the chart's `logFormat`); else plain text.
LOG_FORMAT_ENV = "TFHELM_LOG_FORMAT"


class LaunchError(Exception):
    """The task's environment does not describe a task of a TF cluster."""


def log(msg: str, environ=None) -> None:
    """A line on stderr: `tfhelm-launcher: msg`, or with TFHELM_LOG_FORMAT=json (the chart's
    `logFormat: json`) one JSON object: ts, level, logger, cluster, role, index, msg. A message
    that starts with `error: ` or `warning: ` has that level, any other is `info`."""
    env = os.environ if environ is None else environ
    if env.get(LOG_FORMAT_ENV) != "json":
        print(f"tfhelm-launcher: {msg}", file=sys.stderr, flush=True)
        return
    level = "info"
    for word in ("error", "warning"):
        if msg.startswith(f"{word}: "):
            level, msg = word, msg[len(word) + 2:]
    print(json_line(level, "tfhelm-launcher", msg, **_task_fields(env)), file=sys.stderr, flush=True)


def json_line(level: str, logger: str, msg: str, **fields) -> str:
    """One log record as a line of JSON (UTC time, milliseconds); empty fields left out. The
    reaper writes the same shape (tfhelm.reaper.console imports this)."""
    now = time.time()
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    record = {"ts": ts, "level": level, "logger": logger,
              **{k: v for k, v in fields.items() if v not in (None, "")}, "msg": msg}
    return json.dumps(record, ensure_ascii=False)


def _task_fields(env) -> dict:
    """cluster, role, index: from the pod's environment, or a TF_CONFIG set by hand."""
    role, index = env.get("TFHELM_TASK_TYPE", ""), env.get("TFHELM_TASK_INDEX", "")
    if not role:
        try:
            task = json.loads(env.get("TF_CONFIG", "") or "{}").get("task", {})
            role, index = task.get("type", ""), task.get("index", "")
        except (ValueError, AttributeError):
            pass
    return {"cluster": env.get("TFHELM_CLUSTER", ""), "role": role,
            "index": int(index) if str(index).isdigit() else None}


def expand_cluster(spec: dict) -> dict:
    """The TF_CONFIG `cluster` object from a cluster spec.

    The spec maps each role to `{"count": N, "host": "<...{index}...>:<port>"}` (the chart's
    form, whose size does not depend on N) or to an explicit list of hosts (`tfhelm run
    --local`, whose loopback ports follow no pattern). Hosts come in index order; dump the
    result with sorted keys and compact separators for the canonical TF_CONFIG.
    """
    if not isinstance(spec, dict):
        raise LaunchError("the cluster spec is not a JSON object")
    cluster = {}
    for role, entry in spec.items():
        if role not in ROLES:
            raise LaunchError(f"unknown task type {role!r} in the cluster spec "
                              f"(expected {', '.join(ROLES)})")
        if isinstance(entry, list):
            cluster[role] = entry
            continue
        count, host = (entry.get("count"), entry.get("host")) if isinstance(entry, dict) else (None, None)
        if (not isinstance(count, int) or isinstance(count, bool) or count < 0
                or not isinstance(host, str) or host.count(INDEX) != 1):
            raise LaunchError(f"cluster spec role {role!r}: expected a list of hosts or "
                              f'{{"count": N, "host": "...{INDEX}...:PORT"}}, got {entry!r}')
        head, _, tail = host.partition(INDEX)
        cluster[role] = [f"{head}{i}{tail}" for i in range(count)]
    return cluster


def dumps(obj) -> str:
    """Canonical JSON (sorted keys, compact), byte-identical to Helm's `toJson`."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def read_spec(path: str) -> dict:
    """The TF_CONFIG `cluster` object from the cluster spec file at `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            return expand_cluster(json.load(f))
    except OSError as e:
        raise LaunchError(f"cannot read the cluster spec {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise LaunchError(f"the cluster spec {path} is not valid JSON: {e}") from None
    except LaunchError as e:
        raise LaunchError(f"{path}: {e}") from None


def resolve_tf_config(environ=None) -> dict:
    """This task's TF_CONFIG, from TF_CONFIG or else from the cluster spec file.

    Returns the parsed TF_CONFIG and, when it had to be composed, stores it (canonical JSON)
    in `environ` (default: os.environ) so every library in this process sees it.
    """
    env = os.environ if environ is None else environ
    raw = env.get("TF_CONFIG", "").strip()
    if raw:
        try:
            config = json.loads(raw)
        except json.JSONDecodeError as e:
            raise LaunchError(f"TF_CONFIG is not valid JSON: {e}") from None
        _check(config, "TF_CONFIG")
        return config

    path = env.get("TFHELM_CLUSTER_SPEC_FILE", "")
    if not path:
        raise LaunchError("neither TF_CONFIG nor TFHELM_CLUSTER_SPEC_FILE is set")
    cluster = read_spec(path)
    task_type = env.get("TFHELM_TASK_TYPE", "")
    index = env.get("TFHELM_TASK_INDEX", "")
    if not task_type or not index.isdigit():
        raise LaunchError("TF_CONFIG is not set, so TFHELM_TASK_TYPE and a numeric "
                          f"TFHELM_TASK_INDEX are needed (got {task_type!r}, {index!r})")
    config = {"cluster": cluster, "task": {"type": task_type, "index": int(index)}}
    _check(config, f"the cluster spec {path} with TFHELM_TASK_TYPE/TFHELM_TASK_INDEX")
    env["TF_CONFIG"] = dumps(config)
    return config


def _check(config, source: str) -> None:
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict):
        raise LaunchError(f"{source}: no 'cluster' object")
    cluster = config["cluster"]
    for role, hosts in cluster.items():
        if role not in ROLES:
            raise LaunchError(f"{source}: unknown task type {role!r} in the cluster "
                              f"(expected {', '.join(ROLES)})")
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise LaunchError(f"{source}: cluster[{role!r}] is not a list of host:port strings")
    task = config.get("task")
    if not isinstance(task, dict):
        raise LaunchError(f"{source}: no 'task' object")
    task_type, index = task.get("type"), task.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise LaunchError(f"{source}: task index {index!r} is not an integer")
    if task_type == "evaluator" and "evaluator" not in cluster and index == 0:
        return  # TensorFlow allows the evaluator outside the training cluster (TFJob does that)
    if task_type not in cluster or not 0 <= index < len(cluster[task_type]):
        have = ", ".join(f"{r}[{len(h)}]" for r, h in cluster.items())
        raise LaunchError(f"{source}: task {task_type}:{index} is not in the cluster ({have})")


def task_label(config: dict) -> str:
    return f"{config['task']['type']}:{config['task']['index']}"


def training_cluster(cluster: dict) -> dict:
    """The cluster without the evaluator: it runs no server, so no task may wait for it."""
    return {role: hosts for role, hosts in cluster.items() if role != "evaluator"}


def serve(config: dict) -> int:
    """Start this task's gRPC server and serve until SIGTERM/SIGINT.

    `server.join()` never returns: a PS (or a worker driven by a chief) has no way to know
    that training is over. Whoever decides that (the reaper in the cluster, `tfhelm run
    --local` here) sends SIGTERM; the launcher then leaves at once with 128 + the signal
    number (143), as a process killed by it would. Not 0 on purpose: a worker server pod
    that is evicted mid-training must count as failed, so its Indexed Job brings the index
    back (the coordinator re-adds the worker), not as a completed index that never returns.
    The join runs in a daemon thread so the main thread can take the signal (Python runs
    signal handlers only on the main thread, and not while it is blocked in C++).
    """
    # Report worker/PS failures to the coordinator instead of retrying forever (the
    # documented setting for ParameterServerStrategy clusters).
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    start_metrics(config)
    import tensorflow as tf  # noqa: PLC0415 - lazy on purpose: heavy, and only servers need it

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    task_type, index = resolver.task_type, resolver.task_id
    if task_type not in ("ps", "worker", "chief"):
        raise LaunchError(f"a {task_type} task runs a script, not a server")
    server = tf.distribute.Server(
        training_cluster(resolver.cluster_spec().as_dict()),
        job_name=task_type,
        task_index=index,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    address = config["cluster"][task_type][index]
    log(f"{task_type}:{index} serving on {address} ({server.target}); "
        "stops on SIGTERM")

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum, _frame):
        received.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    joiner = threading.Thread(target=server.join, name="tf-server-join", daemon=True)
    joiner.start()
    while not stop.wait(1.0):  # wake now and then so signals are handled promptly
        if not joiner.is_alive():
            log(f"{task_type}:{index} server stopped by itself")
            return 1
    log(f"{task_type}:{index} stopping on {signal.Signals(received[0]).name}")
    # TensorFlow's gRPC server cannot be shut down cleanly; leave without running its
    # destructors (which can block) - there is nothing to flush in a server task.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + received[0])


def run_script(path: str, args: list[str], started=None) -> int:
    """Run the user's script as `__main__` in a child process; return its exit status."""
    if not os.path.isfile(path):
        raise LaunchError(f"script {path} does not exist")
    return supervise(lambda: _run_path(path, args), started)


def _run_path(path: str, args: list[str]) -> int:
    """In the child: the script, as `python path args` runs it."""
    sys.argv = [path, *args]
    # Like `python path`: the script's directory comes first on sys.path.
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return _exit_status(e.code)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except BaseException as e:  # noqa: BLE001 - any error of the script ends the task
        if os.environ.get(LOG_FORMAT_ENV) == "json":  # one record, the traceback in a field
            print(json_line("error", "tfhelm-launcher", error_line(e), **_task_fields(os.environ),
                            traceback="".join(traceback.format_exception(e)).rstrip()),
                  file=sys.stderr, flush=True)
        else:
            sys.excepthook(type(e), e, e.__traceback__)  # the traceback, as the interpreter prints it
        return failure_exit(e)
    return 0


def failure_exit(exc: BaseException, environ=None) -> int:
    """The exit status for a script that raised `exc`, its one-line reason written for
    Kubernetes: EXIT_RETRY for a TensorFlow error a restart can cure (a peer went away: the
    task is retried), else 1, as Python exits (the task fails at once)."""
    env = os.environ if environ is None else environ
    line = error_line(exc)
    names = {n.strip() for n in env.get("TFHELM_RETRY_ERRORS", RETRY_ERRORS).split(",") if n.strip()}
    if any(cls.__name__ in names for cls in type(exc).__mro__):
        log(f"{type(exc).__name__} is retried (failurePolicy.retryErrors): exit {EXIT_RETRY}")
        termination_message(f"{line} (retried)", env)
        return EXIT_RETRY
    termination_message(line, env)
    return 1


def error_line(exc: BaseException) -> str:
    """`Type: message` on one line, as the last line of a traceback reads. TensorFlow's
    messages span lines (a header such as "Graph execution error:", where the op was defined,
    then the error proper): keep the unindented lines, skip the op's location, and join a
    header that ends in ':' to the line after it."""
    lines = [ln.strip() for ln in str(exc).splitlines()
             if ln.strip() and not ln[:1].isspace() and not ln.startswith("Detected at node")]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= MESSAGE_MAX else line[:MESSAGE_MAX - 3] + "..."


def termination_message(line: str, environ=None) -> None:
    """Tell Kubernetes why the task fails (the pod's `state.terminated.message`)."""
    path = (os.environ if environ is None else environ).get(TERMINATION_LOG_ENV)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(line[:MESSAGE_MAX] + "\n")
    except OSError:
        pass  # nowhere to say it: the log has the error


def supervise(child, started=None) -> int:
    """Run `child()` (it returns an exit status) in a forked process; forward SIGTERM and
    SIGINT to it; return its status, 128 + N if signal N ended it.

    The fork happens before TensorFlow is imported (it starts threads), so it is clean, and
    the child keeps this process's environment, however large TF_CONFIG is. `started()` runs
    in this process after the fork (the metrics server: its thread and socket stay here).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: not PID 1, so SIGTERM's default action stops it
        code = 1
        try:
            _die_with_parent(signal.SIGKILL)
            code = child()
        except SystemExit as e:
            code = _exit_status(e.code)
        except BaseException:  # noqa: BLE001 - a bug of ours: say it, never run on as the parent
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code if isinstance(code, int) and 0 <= code <= 255 else 1)

    received: list[int] = []

    def forward(signum, _frame):
        if not received:
            log(f"{signal.Signals(signum).name}: stopping the task")
        received.append(signum)
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass  # it has exited already; waitpid reaps it

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    if started is not None:
        started()
    _, status = os.waitpid(pid, 0)  # retried after each handler (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    name = signal.Signals(-code).name
    why = " (out of memory, or killed)" if -code == signal.SIGKILL and not received else ""
    log(f"the task was ended by {name}{why}")
    termination_message(f"killed by {name}{why}")
    return 128 - code


def exec_command(argv: list[str], label: str, environ=None, started=None) -> int:
    """The user's own command, TF_CONFIG in its environment, in a child process (see
    `supervise`); returns its exit status."""
    env = os.environ if environ is None else environ
    size = len("TF_CONFIG=") + len(env["TF_CONFIG"].encode()) + 1
    if size > ENV_STRING_MAX:
        raise LaunchError(
            f"TF_CONFIG is {size} bytes, over Linux's limit of {ENV_STRING_MAX} bytes for one "
            f"environment string, so {argv[0]!r} cannot get it: leave the role's `command` "
            "unset (the launcher's script mode runs your script without exec, where any size "
            "works), use fewer tasks, or have your command read TFHELM_CLUSTER_SPEC_FILE")
    log(f"{label} running {' '.join(argv)}")

    def run() -> int:
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as e:
            message = f"cannot run {argv[0]!r}: {e.strerror}"
            log(f"error: {message}")
            termination_message(message, env)
        return EXIT_NOT_FOUND
    return supervise(run, started)


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what the interpreter does for sys.exit("message")
    return 1


def die_with_parent(environ=None) -> None:
    """Under `tfhelm run --local`: get SIGTERM when tfhelm dies, even by SIGKILL (Linux).

    TFHELM_PARENT_PID names the process that started us; if it is already gone (we were
    reparented before prctl took effect), stop now. A no-op in pods, where it is unset.
    """
    env = os.environ if environ is None else environ
    parent = env.pop("TFHELM_PARENT_PID", "")  # not for the script's own subprocesses
    if not parent.isdigit() or not _die_with_parent(signal.SIGTERM):
        return
    if os.getppid() != int(parent):
        log("the process that started this task is gone; stopping")
        sys.exit(1)


def _die_with_parent(sig: int) -> bool:
    """Ask Linux for `sig` when this process's parent dies; False where that cannot be."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(sig))
    except (OSError, AttributeError):
        return False
    return True


def check_keras(environ=None) -> None:
    """Keras 2 asked for (TF_USE_LEGACY_KERAS, from the chart's `keras: "2"` or the image)
    needs tf-keras. Checked before the script starts, without importing TensorFlow, so a task
    that can never work says so in one line and fails at once, not deep in a traceback."""
    env = os.environ if environ is None else environ
    if (env.get("TF_USE_LEGACY_KERAS", "") in ("1", "true", "True")  # what TensorFlow accepts
            and importlib.util.find_spec("tf_keras") is None):
        raise LaunchError(
            "Keras 2 is asked for (TF_USE_LEGACY_KERAS=1, e.g. chart value keras: \"2\") but this "
            f"image has no tf-keras: use an image with tf-keras=={_tf_minor()}.* (the README's "
            "\"Bring your program\" has a recipe), or run the script with Keras 3")


def _tf_minor() -> str:
    """`2.21` for TensorFlow 2.21.x (tf-keras must match it), whichever wheel brought it."""
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu"):
        try:
            return ".".join(importlib.metadata.version(dist).split(".")[:2])
        except importlib.metadata.PackageNotFoundError:
            pass
    return "<your TensorFlow's major.minor>"


# The marker a finished install leaves: a task killed mid-install leaves none, so the next
# one starts over.
PACKAGES_MARKER = ".tfhelm-installed"


def install_packages(target: str, options: list[str], requirements: list[str]) -> int:
    """A run's extra packages, installed once for all its tasks (the chart's install-packages
    init container). `target` is on a volume every task mounts, named by a hash of what goes
    in (the chart computes it): the first task to take the lock installs with `pip install
    --user` (PYTHONUSERBASE=target, so only what the image lacks is installed, and the task's
    Python finds it there); the others, and later runs with the same list, find it done.
    pip's first error line is the task's termination message."""
    import fcntl  # noqa: PLC0415 - Unix only, and only this mode needs them
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(f"{target}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another task is installing the packages into {target}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when it is done, or dies
        marker = os.path.join(target, PACKAGES_MARKER)
        if os.path.exists(marker):
            with open(marker, encoding="utf-8") as f:
                log(f"packages already installed in {target} (by {f.read().strip()})")
            return 0
        shutil.rmtree(target, ignore_errors=True)  # what an interrupted install left
        log(f"installing {' '.join(requirements)} into {target}")
        # pip ignores plain-http sources unless trusted; the user named them (e.g. their own
        # in-cluster file server, which speaks http).
        from urllib.parse import urlparse  # noqa: PLC0415
        trusted = [urlparse(url).hostname for flag, url in zip(options, options[1:])
                   if flag in ("--index-url", "--find-links") and url.startswith("http://")]
        options = options + [arg for host in trusted for arg in ("--trusted-host", host)]
        env = {**os.environ, "PYTHONUSERBASE": target, "PIP_BREAK_SYSTEM_PACKAGES": "1"}
        pip = subprocess.Popen(
            [sys.executable, "-m", "pip", "install", "--user", "--no-cache-dir", "--progress-bar", "off",
             "--disable-pip-version-check", "--no-warn-script-location", *options, *requirements],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        signal.signal(signal.SIGTERM, lambda *_: pip.terminate())  # PID 1: pass it on
        error = last = ""
        for line in pip.stdout:
            sys.stdout.write(line)
            last = line.strip() or last
            if line.startswith("ERROR:") and not error:
                error = line.strip()  # pip's first error names the package; later ones repeat it
        if pip.wait() != 0:
            message = f"pip could not install {' '.join(requirements)}: {error or last}"
            log(f"error: {message}")
            termination_message(message)
            return 1
        with open(marker, "w", encoding="utf-8") as f:
            f.write(f"{os.environ.get('HOSTNAME', '?')}: {' '.join(requirements)}\n")
        log(f"installed into {target}")
        return 0


# ---------------------------------------------------------------- metrics (Prometheus text)

def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        for _ in range(8):
            n = (n >> 1) ^ 0x82F63B78 if n & 1 else n >> 1
        table.append(n)
    return table


_CRC32C = _crc_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of TFRecord files."""
    crc, table = 0xFFFFFFFF, _CRC32C
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC of `data` (rotated right by 15 bits, plus a constant)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def proto_fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes else."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = buf[i:i + size], i + size
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        else:
            raise ValueError(f"protobuf wire type {wire} is not supported")
        yield key >> 3, wire, value


# TensorProto dtypes of a scalar summary -> struct format of their tensor_content.
_DTYPES = {1: "f", 2: "d", 3: "i", 4: "B", 5: "h", 6: "b", 9: "q", 19: "e"}
_BFLOAT16 = 14


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a TensorProto holding one number (tf.summary.scalar's), else None
    (histograms, images, text: not scalars)."""
    dtype, content, vals = 0, None, []
    for num, wire, v in proto_fields(buf):
        if num == 1:
            dtype = v
        elif num == 2 and any(n == 2 for n, _, _ in proto_fields(v)):
            return None  # a dimension: not a scalar
        elif num == 4:
            content = v
        elif num in (5, 6):  # float_val, double_val: packed or one by one
            fmt = "<f" if num == 5 else "<d"
            step = struct.calcsize(fmt)
            vals += [struct.unpack_from(fmt, v, k)[0] for k in range(0, len(v) - step + 1, step)]
        elif num in (7, 10, 13) and wire == 0:  # int_val, int64_val, half_val (bits)
            vals.append(v)
        elif num in (7, 10, 13):
            k = 0
            while k < len(v):
                x, k = _varint(v, k)
                vals.append(x)
    if dtype == _BFLOAT16 or (dtype == 19 and vals and content is None):
        bits = struct.unpack("<H", content[:2])[0] if content else vals[0] if vals else None
        if bits is None:
            return None
        return (struct.unpack("<f", struct.pack("<I", bits << 16))[0] if dtype == _BFLOAT16
                else struct.unpack("<e", struct.pack("<H", bits))[0])
    if dtype not in _DTYPES:
        return None
    if content:
        return float(struct.unpack_from("<" + _DTYPES[dtype], content)[0])
    if not vals:
        return None
    x = vals[0]
    if dtype in (3, 9) and x >= 1 << 63:
        x -= 1 << 64
    return float(x)


def parse_event(data: bytes) -> tuple[float, int, list[tuple[str, float]]]:
    """(wall_time, step, [(tag, value)]) of a serialized Event: its scalar summary values,
    old-style (simple_value) and TF2 (a scalar tensor)."""
    wall, step, scalars = 0.0, 0, []
    for num, wire, v in proto_fields(data):
        if num == 1 and wire == 1:
            wall = struct.unpack("<d", v)[0]
        elif num == 2 and wire == 0:
            step = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 5 and wire == 2:
            for n, _, value in proto_fields(v):
                if n != 1:
                    continue
                tag, number = "", None
                for f, w, x in proto_fields(value):
                    if f == 1:
                        tag = x.decode("utf-8", "replace")
                    elif f == 2 and w == 5:
                        number = struct.unpack("<f", x)[0]
                    elif f == 8:
                        number = _tensor_scalar(x)
                if tag and number is not None:
                    scalars.append((tag, number))
    return wall, step, scalars


class Progress:
    """The training's latest step and scalars, per directory of event files under `root`.

    Each file is read from where the last scrape stopped; a record still being written
    (too short) is read next time, a record whose CRC is wrong ends the reading of that file.
    The newest event (by wall time) of a directory gives its step; each tag keeps its newest
    value. At most `max_files` files are read (the first, in sorted order)."""

    def __init__(self, root: str, max_files: int = 500):
        self.root, self.max_files = root, max_files
        self.offsets: dict[str, int | None] = {}
        self.runs: dict[str, dict] = {}  # dir -> {"wall", "step", "scalars": {tag: (wall, value)}}

    def update(self) -> None:
        paths: list[str] = []
        for here, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            paths += [os.path.join(here, n) for n in sorted(names) if ".tfevents." in n]
            if len(paths) >= self.max_files:
                break
        for path in paths[:self.max_files]:
            self._read(path)

    def _read(self, path: str) -> None:
        offset = self.offsets.get(path, 0)
        if offset is None:
            return
        run = os.path.relpath(os.path.dirname(path), self.root)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                while True:
                    head = f.read(12)
                    if len(head) < 12:
                        break
                    length, crc = struct.unpack("<QI", head)
                    if crc != masked_crc(head[:8]):
                        raise ValueError("bad length checksum")
                    body = f.read(length + 4)
                    if len(body) < length + 4:
                        break
                    if struct.unpack("<I", body[length:])[0] != masked_crc(body[:length]):
                        raise ValueError("bad record checksum")
                    self._event(run, body[:length])
                    offset += 12 + length + 4
        except OSError:
            pass  # gone, or not readable now: try again next time
        except (ValueError, IndexError, struct.error) as e:
            log(f"warning: {path}: {e} at byte {offset}; its later records are not read")
            self.offsets[path] = None
            return
        self.offsets[path] = offset

    def _event(self, run: str, data: bytes) -> None:
        wall, step, scalars = parse_event(data)
        if not scalars:
            return
        r = self.runs.setdefault(run, {"wall": wall, "step": step, "scalars": {}})
        if wall >= r["wall"]:
            r["wall"], r["step"] = wall, step
        for tag, value in scalars:
            if wall >= r["scalars"].get(tag, (wall, 0))[0]:
                r["scalars"][tag] = (wall, value)


def sample_line(name: str, labels: dict, value) -> str:
    """One sample in Prometheus' text format, label values escaped (the reaper's too)."""
    esc = lambda v: str(v).replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")  # noqa: E731
    inside = ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())
    return f"{name}{{{inside}}} {float(value)!r}" if inside else f"{name} {float(value)!r}"


class TaskMetrics:
    """This task's metrics in Prometheus' text format (`render()`)."""

    HELP = {
        "tfhelm_task_up": ("gauge", "1 while the task's launcher runs."),
        "tfhelm_task_start_time_seconds": ("gauge", "When this task's launcher started (Unix time)."),
        "tfhelm_task_restarts_total": ("counter", "Earlier attempts of this task: failed pods of its "
                                       "Job index, and container restarts in this pod."),
        "tfhelm_task_decides_completion": ("gauge", "1 on the tasks whose Job decides when training "
                                           "is done (the chief if there is one, else the workers)."),
        "tfhelm_train_step": ("gauge", "Step of the newest summary in the run's event files, per directory."),
        "tfhelm_train_scalar": ("gauge", "Newest value of each scalar summary, per directory and tag."),
        "tfhelm_train_last_event_time_seconds": ("gauge", "Wall time of the newest summary, per directory."),
    }

    def __init__(self, config: dict, environ=None, clock=time.time):
        env = os.environ if environ is None else environ
        task, cluster = config["task"], config["cluster"]
        self.labels = {"cluster": env.get("TFHELM_CLUSTER", ""), "role": task["type"],
                       "index": str(task["index"])}
        self.start = clock()
        self.restarts = self._restarts(env)
        first = ("chief", 0) if cluster.get("chief") else ("worker", 0)
        self.decides = task["type"] == first[0]
        log_dir = env.get("TFHELM_LOG_DIR", "")
        reports = env.get("TFHELM_METRICS_PROGRESS", "1") != "0" and (task["type"], task["index"]) == first
        self.progress = Progress(log_dir) if reports and log_dir else None
        self.lock = threading.Lock()

    def _restarts(self, env) -> int:
        """Failed pods of this Job index (the Job controller's annotations, through the
        downward API), plus starts of this container before this one: a count kept in the
        pod's /tmp (an emptyDir survives container restarts)."""
        count = sum(int(env.get(k, "") or 0) for k in ("TFHELM_INDEX_FAILURES", "TFHELM_INDEX_IGNORED_FAILURES")
                    if (env.get(k, "") or "0").isdigit())
        path = os.path.join(env.get("TFHELM_STATE_DIR", "/tmp"), ".tfhelm-starts")
        try:
            with open(path, "a+", encoding="utf-8") as f:
                f.seek(0)
                before = len(f.read())
                f.write("x")
            count += before
        except OSError:
            pass
        return count

    def render(self) -> str:
        samples = {"tfhelm_task_up": [(self.labels, 1)],
                   "tfhelm_task_start_time_seconds": [(self.labels, self.start)],
                   "tfhelm_task_restarts_total": [(self.labels, self.restarts)]}
        if self.decides:
            samples["tfhelm_task_decides_completion"] = [(self.labels, 1)]
        if self.progress is not None:
            with self.lock:
                self.progress.update()
                runs = sorted(self.progress.runs.items())
            for run, r in runs:
                at = {**self.labels, "dir": run}
                samples.setdefault("tfhelm_train_step", []).append((at, r["step"]))
                samples.setdefault("tfhelm_train_last_event_time_seconds", []).append((at, r["wall"]))
                for tag, (_, value) in sorted(r["scalars"].items()):
                    samples.setdefault("tfhelm_train_scalar", []).append(({**at, "tag": tag}, value))
        out = []
        for name, rows in samples.items():
            kind, text = self.HELP[name]
            out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            out += [sample_line(name, labels, value) for labels, value in rows]
        return "\n".join(out) + "\n"


def start_metrics(config: dict, environ=None):
    """Serve this task's `TaskMetrics` on TFHELM_METRICS_PORT; None when it is unset, or when
    anything goes wrong (said in a warning: metrics never stop a training)."""
    env = os.environ if environ is None else environ
    port = env.get(METRICS_PORT_ENV, "")
    if not port.isdigit():
        return None
    try:
        return serve_metrics(int(port), TaskMetrics(config, env).render)
    except Exception as e:  # noqa: BLE001 - a bug here must not end the task
        log(f"warning: metrics not served: {type(e).__name__}: {e}")
        return None


def serve_metrics(port: int, render, say=None):
    """Serve `render()` as Prometheus text at /metrics on `port` (all addresses, IPv6 and
    IPv4) from a daemon thread; the server, or None if the port is taken (said: metrics never
    stop a training). The reaper serves its own metrics with this too (`say`: its log)."""
    say = say or log
    import socket  # noqa: PLC0415 - only processes that serve metrics need these
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: PLC0415

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    class DualStack(ThreadingHTTPServer):
        address_family = socket.AF_INET6

        def server_bind(self):
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            super().server_bind()

    server, error = None, None
    for cls, host in ((DualStack, "::"), (ThreadingHTTPServer, "0.0.0.0")):
        try:
            server = cls((host, port), Handler)
            break
        except OSError as e:
            error = e
    if server is None:
        say(f"warning: metrics not served: port {port}: {error.strerror}")
        return None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="tfhelm-metrics", daemon=True).start()
    say(f"metrics on :{server.server_address[1]}/metrics")
    return server


def _bad_arguments(mode: str, rest: list[str]) -> bool:
    if mode in ("server", "tfconfig"):
        return bool(rest)
    if mode == "packages":
        return "--" not in rest[1:] or rest[-1] == "--"
    if mode == "exec":
        return not rest or rest == ["--"]
    return mode != "script" or not rest


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return EXIT_USAGE if not argv else 0
    mode, rest = argv[0], argv[1:]
    if _bad_arguments(mode, rest):
        log(f"bad arguments {argv!r}; {USAGE}")
        return EXIT_USAGE
    if mode == "packages":
        split = rest.index("--", 1)
        return install_packages(rest[0], rest[1:split], rest[split + 1:])
    if mode != "tfconfig":
        die_with_parent()
    try:
        config = resolve_tf_config()
        if mode == "tfconfig":
            print(dumps(config))
            return 0
        if mode == "server":
            return serve(config)
        check_keras()
        started = lambda: start_metrics(config)  # noqa: E731 - after the fork, in this process
        if mode == "exec":
            command = rest[1:] if rest[0] == "--" else rest
            return exec_command(command, task_label(config), started=started)
        log(f"{task_label(config)} running {rest[0]}"
            + (f" with {' '.join(rest[1:])}" if rest[1:] else ""))
        return run_script(rest[0], rest[1:], started)
    except LaunchError as e:
        log(f"error: {e}")
        termination_message(str(e))
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
