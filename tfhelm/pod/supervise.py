"""The user's script (or command) in a child process of the launcher.

The launcher is the container's PID 1, and the kernel gives PID 1 no default action for
SIGTERM: a script that installs no handler would ignore the kubelet's SIGTERM and die only
by SIGKILL at the end of the grace period (30 s), while the next task of the same index
waits, or starts beside it. So `script` and `exec` modes fork (`supervise`): the child, not
PID 1, runs the script or execs the command, and SIGTERM stops it; this process forwards
SIGTERM and SIGINT to it, reaps it and exits with its status (128 + N for signal N). It also
tells Kubernetes why a task failed, in one line (the termination message that `tfhelm
status` shows), and exits `task.retryExitCode` (75) for the errors a restart can cure (a
peer that went away), so the Job's podFailurePolicy retries those and fails a task at once
on any other error of the script (`failure_exit`).

`script` mode runs the script with runpy in the child instead of exec'ing it: a TF_CONFIG
larger than Linux's 128 KiB per environment string never passes through execve. `exec`
mode must pass it through execve, and says so when it would not fit.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import traceback

from tfhelm import contract
from tfhelm.pod import fence
from tfhelm.pod.logs import LOG_FORMAT, json_line, log, task_fields
from tfhelm.pod.tfconfig import LaunchError

EXIT_NOT_FOUND = 127  # as a shell reports a command it cannot run
EXIT_RETRY = contract.task("retryExitCode")
RETRY_ERRORS, TERMINATION_LOG, PARENT_PID = (contract.env(k) for k in ("retryErrors", "terminationLog",
                                                                         "parentPid"))
MESSAGE_MAX = 1024  # characters; Kubernetes keeps 4096 bytes of a termination message
# Linux's MAX_ARG_STRLEN: one environment string (NAME=value and its NUL) is at most 32 pages.
ENV_STRING_MAX = 128 * 1024


def run_script(path: str, args: list[str], started=None) -> int:
    """Run the user's script as `__main__` in a child process; return its exit status."""
    if not os.path.isfile(path):
        raise LaunchError(f"script {path} does not exist")
    return supervise(lambda: _run_path(path, args), started)


def _run_path(path: str, args: list[str]) -> int:
    """In the child: the script, as `python path args` runs it."""
    library = shipped_dir()
    _forget_shipped_modules()
    sys.argv = [path, *args]
    # Like `python path`: the script's directory comes first on sys.path. The helpers the
    # chart ships for scripts (`import tfhelm_preemption`) come last: the script's own win.
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    if library:
        sys.path.append(library)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return _exit_status(e.code)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except BaseException as e:  # noqa: BLE001 - any error of the script ends the task
        if os.environ.get(LOG_FORMAT) == "json":  # one record, the traceback in a field
            print(json_line("error", "tfhelm-launcher", error_line(e), **task_fields(os.environ),
                            traceback="".join(traceback.format_exception(e)).rstrip()),
                  file=sys.stderr, flush=True)
        else:
            sys.excepthook(type(e), e, e.__traceback__)  # the traceback, as the interpreter prints it
        return failure_exit(e)
    return 0


def shipped_dir() -> str | None:
    """The directory of the chart's copy of the launcher (the entry file's finder knows it),
    where the helpers for scripts (tfhelm_preemption.py) lie beside it; None when this runs
    from tfhelm's own package."""
    return next((f.here for f in sys.meta_path if getattr(f, "tfhelm_shipped", False)), None)


def _forget_shipped_modules() -> None:
    """In a pod the launcher's modules come from files beside it (the chart's entry file
    finds them): the script's own `import tfhelm` must find the tfhelm its image may hold."""
    finders = [f for f in sys.meta_path if getattr(f, "tfhelm_shipped", False)]
    if not finders:
        return
    sys.meta_path[:] = [f for f in sys.meta_path if f not in finders]
    sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)  # the entry file turned it on
    for name in [n for n in sys.modules if n == "tfhelm" or n.startswith("tfhelm.")]:
        del sys.modules[name]


def failure_exit(exc: BaseException, environ=None) -> int:
    """The exit status for a script that raised `exc`, its one-line reason written for
    Kubernetes: EXIT_RETRY for an error a restart can cure (named, or wrapping one named, in
    the environment's retryErrors, else the contract's: a peer went away), else 1, as Python exits (the task
    fails at once)."""
    env = os.environ if environ is None else environ
    line = error_line(exc)
    given = env.get(RETRY_ERRORS)
    names = ({n.strip() for n in given.split(",") if n.strip()} if given is not None
             else set(contract.task("retryErrors")))
    if any(cls.__name__ in names for error in wrapped(exc) for cls in type(error).__mro__):
        log(f"{type(exc).__name__} is retried (failurePolicy.retryErrors): exit {EXIT_RETRY}")
        termination_message(f"{line} (retried)", env)
        return EXIT_RETRY
    termination_message(line, env)
    return 1


def wrapped(exc: BaseException) -> list[BaseException]:
    """`exc` and the errors it wraps: TensorFlow's ClusterCoordinator raises a step's error
    (a worker server gone) wrapped in ClosureInputError or ClosureAbortedError
    (`original_exception`); `raise ... from` keeps it as `__cause__`."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = getattr(exc, "original_exception", None) or exc.__cause__
    return chain


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
    """Tell Kubernetes why the task fails (the pod's `state.terminated.message`); unset (a
    local run), nothing is written."""
    path = (os.environ if environ is None else environ).get(TERMINATION_LOG)
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
    fence.guard(replaced(pid))
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


def replaced(child: int | None = None):
    """What the fence (tfhelm.pod.fence) does once another pod owns this task: say so, kill
    the script (SIGKILL: nothing of it may run on) and leave; the container ends with this
    process, and everything in it."""
    def stop(other: str) -> None:
        log(f"error: pod {other} runs this task now (this pod was replaced: its node was lost "
            "and came back?); stopping")
        termination_message(f"replaced by pod {other}")
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_RETRY)
    return stop


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
            f"works), use fewer tasks, or have your command read {contract.env('clusterSpecFile')}")
    log(f"{label} running {' '.join(argv)}")
    library = shipped_dir()
    if library:  # a Python command imports tfhelm_preemption too (its own modules first)
        env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (env.get("PYTHONPATH"), library) if p)}

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

    The environment's parentPid names the process that started us; if it is already gone (we
    were reparented before prctl took effect), stop now. A no-op in pods, where it is unset.
    """
    env = os.environ if environ is None else environ
    parent = env.pop(PARENT_PID, "")  # not for the script's own subprocesses
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
