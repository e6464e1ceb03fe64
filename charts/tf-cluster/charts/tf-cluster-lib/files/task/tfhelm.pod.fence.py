# tfhelm/pod/fence.py without its prose (make chart-files)
from __future__ import annotations
import os
import threading
from typing import Callable
from tfhelm import contract
POD_UID, LOG_DIR, TASK_TYPE, TASK_INDEX = (contract.env(k) for k in ("podUid", "logDir", "taskType", "taskIndex"))
POLL = 2.0
def claim_path(environ=None) -> str | None:
    env = os.environ if environ is None else environ
    if not all(env.get(k) for k in (POD_UID, LOG_DIR, TASK_TYPE, TASK_INDEX)):
        return None
    return os.path.join(env[LOG_DIR], ".tfhelm", "tasks", f"{env[TASK_TYPE]}-{env[TASK_INDEX]}")
def owner(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None
def claim(path: str, uid: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    part = f"{path}.{uid}"
    with open(part, "w", encoding="utf-8") as f:
        f.write(uid + "\n")
    os.replace(part, path)
def guard(on_taken: Callable[[str], None], environ=None, poll: float = POLL) -> threading.Event | None:
    env = os.environ if environ is None else environ
    path = claim_path(env)
    if path is None:
        return None
    uid = env[POD_UID]
    try:
        claim(path, uid)
    except OSError:
        return None
    stop = threading.Event()
    def watch() -> None:
        while not stop.wait(poll):
            other = owner(path)
            if other is not None and other != uid:
                on_taken(other)
                return
    threading.Thread(target=watch, name="tfhelm-fence", daemon=True).start()
    return stop
