# tfhelm/pod/launcher.py without its prose (make chart-files)
from __future__ import annotations
import sys
from tfhelm import contract
from tfhelm.pod.logs import log
from tfhelm.pod.tfconfig import LaunchError, dumps, resolve_tf_config, task_label
MODES = contract.task("modes")
SERVER, SCRIPT = MODES["server"], MODES["script"]
USAGE = (f"usage: launcher.py {SERVER} | launcher.py {SCRIPT} PATH [ARGS...] | "
         "launcher.py exec [--] CMD [ARGS...] | launcher.py tfconfig | "
         "launcher.py packages SHARED PRIVATE [PIP OPTIONS...] -- REQUIREMENT...")
EXIT_USAGE = 2
def _bad_arguments(mode: str, rest: list[str]) -> bool:
    if mode in (SERVER, "tfconfig"):
        return bool(rest)
    if mode == "packages":
        return "--" not in rest[2:] or rest[-1] == "--"
    if mode == "exec":
        return not rest or rest == ["--"]
    return mode != SCRIPT or not rest
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
        from tfhelm.pod.packages import install_packages
        split = rest.index("--", 2)
        return install_packages(rest[0], rest[1], rest[2:split], rest[split + 1:])
    from tfhelm.pod import supervise
    if mode != "tfconfig":
        supervise.die_with_parent()
    try:
        config = resolve_tf_config()
        if mode == "tfconfig":
            print(dumps(config))
            return 0
        if mode == SERVER:
            from tfhelm.pod.serve import serve
            return serve(config)
        from tfhelm.pod.keras import check_keras
        from tfhelm.pod.metrics import start_metrics
        check_keras()
        started = lambda: start_metrics(config)
        if mode == "exec":
            command = rest[1:] if rest[0] == "--" else rest
            return supervise.exec_command(command, task_label(config), started=started)
        log(f"{task_label(config)} running {rest[0]}"
            + (f" with {' '.join(rest[1:])}" if rest[1:] else ""))
        return supervise.run_script(rest[0], rest[1:], started)
    except LaunchError as e:
        log(f"error: {e}")
        supervise.termination_message(str(e))
        return EXIT_USAGE
if __name__ == "__main__":
    sys.exit(main())
