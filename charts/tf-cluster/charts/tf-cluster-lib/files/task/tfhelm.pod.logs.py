# tfhelm/pod/logs.py without its prose (make chart-files)
from __future__ import annotations
import json
import os
import sys
import time
from tfhelm import contract
LOG_FORMAT, TASK_TYPE, TASK_INDEX, CLUSTER = (contract.env(k) for k in ("logFormat", "taskType", "taskIndex",
                                                                          "cluster"))
def log(msg: str, environ=None) -> None:
    env = os.environ if environ is None else environ
    if env.get(LOG_FORMAT) != "json":
        print(f"tfhelm-launcher: {msg}", file=sys.stderr, flush=True)
        return
    level = "info"
    for word in ("error", "warning"):
        if msg.startswith(f"{word}: "):
            level, msg = word, msg[len(word) + 2:]
    print(json_line(level, "tfhelm-launcher", msg, **task_fields(env)), file=sys.stderr, flush=True)
def json_line(level: str, logger: str, msg: str, **fields) -> str:
    now = time.time()
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    record = {"ts": ts, "level": level, "logger": logger,
              **{k: v for k, v in fields.items() if v not in (None, "")}, "msg": msg}
    return json.dumps(record, ensure_ascii=False)
def task_fields(env) -> dict:
    role, index = env.get(TASK_TYPE, ""), env.get(TASK_INDEX, "")
    if not role:
        try:
            task = json.loads(env.get("TF_CONFIG", "") or "{}").get("task", {})
            role, index = task.get("type", ""), task.get("index", "")
        except (ValueError, AttributeError):
            pass
    return {"cluster": env.get(CLUSTER, ""), "role": role,
            "index": int(index) if str(index).isdigit() else None}
