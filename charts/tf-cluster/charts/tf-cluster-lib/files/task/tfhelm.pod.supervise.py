# tfhelm/pod/supervise.py without its prose (make chart-files)
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
EXIT_NOT_FOUND = 127
EXIT_RETRY = contract.task("retryExitCode")
RETRY_ERRORS, TERMINATION_LOG, PARENT_PID = (contract.env(k) for k in ("retryErrors", "terminationLog",
                                                                         "parentPid"))
MESSAGE_MAX = 1024
ENV_STRING_MAX = 128 * 1024
def run_script(path: str, args: list[str], started=None) -> int:
    if not os.path.isfile(path):
        raise LaunchError(f"script {path} does not exist")
    return supervise(lambda: _run_path(path, args), started)
def _run_path(path: str, args: list[str]) -> int:
    library = shipped_dir()
    _forget_shipped_modules()
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    if library:
        sys.path.append(library)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return _exit_status(e.code)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except BaseException as e:
        if os.environ.get(LOG_FORMAT) == "json":
            print(json_line("error", "tfhelm-launcher", error_line(e), **task_fields(os.environ),
                            traceback="".join(traceback.format_exception(e)).rstrip()),
                  file=sys.stderr, flush=True)
        else:
            sys.excepthook(type(e), e, e.__traceback__)
        return failure_exit(e)
    return 0
def shipped_dir() -> str | None:
    return next((f.here for f in sys.meta_path if getattr(f, "tfhelm_shipped", False)), None)
def _forget_shipped_modules() -> None:
    finders = [f for f in sys.meta_path if getattr(f, "tfhelm_shipped", False)]
    if not finders:
        return
    sys.meta_path[:] = [f for f in sys.meta_path if f not in finders]
    sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)
    for name in [n for n in sys.modules if n == "tfhelm" or n.startswith("tfhelm.")]:
        del sys.modules[name]
def failure_exit(exc: BaseException, environ=None) -> int:
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
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = getattr(exc, "original_exception", None) or exc.__cause__
    return chain
def error_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines()
             if ln.strip() and not ln[:1].isspace() and not ln.startswith("Detected at node")]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= MESSAGE_MAX else line[:MESSAGE_MAX - 3] + "..."
def termination_message(line: str, environ=None) -> None:
    path = (os.environ if environ is None else environ).get(TERMINATION_LOG)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(line[:MESSAGE_MAX] + "\n")
    except OSError:
        pass
def supervise(child, started=None) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _die_with_parent(signal.SIGKILL)
            code = child()
        except SystemExit as e:
            code = _exit_status(e.code)
        except BaseException:
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
            pass
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    fence.guard(replaced(pid))
    if started is not None:
        started()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    name = signal.Signals(-code).name
    why = " (out of memory, or killed)" if -code == signal.SIGKILL and not received else ""
    log(f"the task was ended by {name}{why}")
    termination_message(f"killed by {name}{why}")
    return 128 - code
def replaced(child: int | None = None):
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
    if library:
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
    print(code, file=sys.stderr)
    return 1
def die_with_parent(environ=None) -> None:
    env = os.environ if environ is None else environ
    parent = env.pop(PARENT_PID, "")
    if not parent.isdigit() or not _die_with_parent(signal.SIGTERM):
        return
    if os.getppid() != int(parent):
        log("the process that started this task is gone; stopping")
        sys.exit(1)
def _die_with_parent(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(sig))
    except (OSError, AttributeError):
        return False
    return True
