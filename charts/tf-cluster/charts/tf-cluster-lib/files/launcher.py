# Generated from tfhelm/launcher.py by `make chart-files`: read and edit that file.
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
EXIT_NOT_FOUND = 127
EXIT_RETRY = 75
RETRY_ERRORS = "UnavailableError,AbortedError,DeadlineExceededError,CancelledError"
TERMINATION_LOG_ENV = "TFHELM_TERMINATION_LOG"
MESSAGE_MAX = 1024
INDEX = "{index}"
ENV_STRING_MAX = 128 * 1024
METRICS_PORT_ENV = "TFHELM_METRICS_PORT"
LOG_FORMAT_ENV = "TFHELM_LOG_FORMAT"
class LaunchError(Exception):
    pass
def log(msg: str, environ=None) -> None:
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
    now = time.time()
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    record = {"ts": ts, "level": level, "logger": logger,
              **{k: v for k, v in fields.items() if v not in (None, "")}, "msg": msg}
    return json.dumps(record, ensure_ascii=False)
def _task_fields(env) -> dict:
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
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
def read_spec(path: str) -> dict:
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
        return
    if task_type not in cluster or not 0 <= index < len(cluster[task_type]):
        have = ", ".join(f"{r}[{len(h)}]" for r, h in cluster.items())
        raise LaunchError(f"{source}: task {task_type}:{index} is not in the cluster ({have})")
def task_label(config: dict) -> str:
    return f"{config['task']['type']}:{config['task']['index']}"
def training_cluster(cluster: dict) -> dict:
    return {role: hosts for role, hosts in cluster.items() if role != "evaluator"}
def serve(config: dict) -> int:
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    start_metrics(config)
    import tensorflow as tf
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
    while not stop.wait(1.0):
        if not joiner.is_alive():
            log(f"{task_type}:{index} server stopped by itself")
            return 1
    log(f"{task_type}:{index} stopping on {signal.Signals(received[0]).name}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + received[0])
def run_script(path: str, args: list[str], started=None) -> int:
    if not os.path.isfile(path):
        raise LaunchError(f"script {path} does not exist")
    return supervise(lambda: _run_path(path, args), started)
def _run_path(path: str, args: list[str]) -> int:
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return _exit_status(e.code)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except BaseException as e:
        if os.environ.get(LOG_FORMAT_ENV) == "json":
            print(json_line("error", "tfhelm-launcher", error_line(e), **_task_fields(os.environ),
                            traceback="".join(traceback.format_exception(e)).rstrip()),
                  file=sys.stderr, flush=True)
        else:
            sys.excepthook(type(e), e, e.__traceback__)
        return failure_exit(e)
    return 0
def failure_exit(exc: BaseException, environ=None) -> int:
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
    lines = [ln.strip() for ln in str(exc).splitlines()
             if ln.strip() and not ln[:1].isspace() and not ln.startswith("Detected at node")]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= MESSAGE_MAX else line[:MESSAGE_MAX - 3] + "..."
def termination_message(line: str, environ=None) -> None:
    path = (os.environ if environ is None else environ).get(TERMINATION_LOG_ENV)
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
def exec_command(argv: list[str], label: str, environ=None, started=None) -> int:
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
    print(code, file=sys.stderr)
    return 1
def die_with_parent(environ=None) -> None:
    env = os.environ if environ is None else environ
    parent = env.pop("TFHELM_PARENT_PID", "")
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
def check_keras(environ=None) -> None:
    env = os.environ if environ is None else environ
    if (env.get("TF_USE_LEGACY_KERAS", "") in ("1", "true", "True")
            and importlib.util.find_spec("tf_keras") is None):
        raise LaunchError(
            "Keras 2 is asked for (TF_USE_LEGACY_KERAS=1, e.g. chart value keras: \"2\") but this "
            f"image has no tf-keras: use an image with tf-keras=={_tf_minor()}.* (the README's "
            "\"Bring your program\" has a recipe), or run the script with Keras 3")
def _tf_minor() -> str:
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu"):
        try:
            return ".".join(importlib.metadata.version(dist).split(".")[:2])
        except importlib.metadata.PackageNotFoundError:
            pass
    return "<your TensorFlow's major.minor>"
PACKAGES_MARKER = ".tfhelm-installed"
def install_packages(target: str, options: list[str], requirements: list[str]) -> int:
    import fcntl
    import shutil
    import subprocess
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(f"{target}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another task is installing the packages into {target}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        marker = os.path.join(target, PACKAGES_MARKER)
        if os.path.exists(marker):
            with open(marker, encoding="utf-8") as f:
                log(f"packages already installed in {target} (by {f.read().strip()})")
            return 0
        shutil.rmtree(target, ignore_errors=True)
        log(f"installing {' '.join(requirements)} into {target}")
        from urllib.parse import urlparse
        trusted = [urlparse(url).hostname for flag, url in zip(options, options[1:])
                   if flag in ("--index-url", "--find-links") and url.startswith("http://")]
        options = options + [arg for host in trusted for arg in ("--trusted-host", host)]
        env = {**os.environ, "PYTHONUSERBASE": target, "PIP_BREAK_SYSTEM_PACKAGES": "1"}
        pip = subprocess.Popen(
            [sys.executable, "-m", "pip", "install", "--user", "--no-cache-dir", "--progress-bar", "off",
             "--disable-pip-version-check", "--no-warn-script-location", *options, *requirements],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        signal.signal(signal.SIGTERM, lambda *_: pip.terminate())
        error = last = ""
        for line in pip.stdout:
            sys.stdout.write(line)
            last = line.strip() or last
            if line.startswith("ERROR:") and not error:
                error = line.strip()
        if pip.wait() != 0:
            message = f"pip could not install {' '.join(requirements)}: {error or last}"
            log(f"error: {message}")
            termination_message(message)
            return 1
        with open(marker, "w", encoding="utf-8") as f:
            f.write(f"{os.environ.get('HOSTNAME', '?')}: {' '.join(requirements)}\n")
        log(f"installed into {target}")
        return 0
def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        for _ in range(8):
            n = (n >> 1) ^ 0x82F63B78 if n & 1 else n >> 1
        table.append(n)
    return table
_CRC32C = _crc_table()
def crc32c(data: bytes) -> int:
    crc, table = 0xFFFFFFFF, _CRC32C
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
def masked_crc(data: bytes) -> int:
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
_DTYPES = {1: "f", 2: "d", 3: "i", 4: "B", 5: "h", 6: "b", 9: "q", 19: "e"}
_BFLOAT16 = 14
def _tensor_scalar(buf: bytes) -> float | None:
    dtype, content, vals = 0, None, []
    for num, wire, v in proto_fields(buf):
        if num == 1:
            dtype = v
        elif num == 2 and any(n == 2 for n, _, _ in proto_fields(v)):
            return None
        elif num == 4:
            content = v
        elif num in (5, 6):
            fmt = "<f" if num == 5 else "<d"
            step = struct.calcsize(fmt)
            vals += [struct.unpack_from(fmt, v, k)[0] for k in range(0, len(v) - step + 1, step)]
        elif num in (7, 10, 13) and wire == 0:
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
    def __init__(self, root: str, max_files: int = 500):
        self.root, self.max_files = root, max_files
        self.offsets: dict[str, int | None] = {}
        self.runs: dict[str, dict] = {}
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
            pass
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
    esc = lambda v: str(v).replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")
    inside = ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())
    return f"{name}{{{inside}}} {float(value)!r}" if inside else f"{name} {float(value)!r}"
class TaskMetrics:
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
    env = os.environ if environ is None else environ
    port = env.get(METRICS_PORT_ENV, "")
    if not port.isdigit():
        return None
    try:
        return serve_metrics(int(port), TaskMetrics(config, env).render)
    except Exception as e:
        log(f"warning: metrics not served: {type(e).__name__}: {e}")
        return None
def serve_metrics(port: int, render, say=None):
    say = say or log
    import socket
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
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
        started = lambda: start_metrics(config)
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
