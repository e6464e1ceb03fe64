"""The lines the pods' programs write: `tfhelm-launcher: msg` for humans, or with the chart's
`logFormat: json` one JSON object a line (ts, level, logger, the task's cluster, role and
index, msg) for a log collector."""

from __future__ import annotations

import json
import os
import sys
import time

from tfhelm import contract

LOG_FORMAT, TASK_TYPE, TASK_INDEX, CLUSTER = (contract.env(k) for k in ("logFormat", "taskType", "taskIndex",
                                                                          "cluster"))


def log(msg: str, environ=None) -> None:
    """A line on stderr. A message that starts with `error: ` or `warning: ` has that level,
    any other is `info`."""
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
    """One log record as a line of JSON (UTC time, milliseconds); empty fields left out. The
    reaper writes the same shape."""
    now = time.time()
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    record = {"ts": ts, "level": level, "logger": logger,
              **{k: v for k, v in fields.items() if v not in (None, "")}, "msg": msg}
    return json.dumps(record, ensure_ascii=False)


def task_fields(env) -> dict:
    """cluster, role, index: from the pod's environment, or a TF_CONFIG set by hand."""
    role, index = env.get(TASK_TYPE, ""), env.get(TASK_INDEX, "")
    if not role:
        try:
            task = json.loads(env.get("TF_CONFIG", "") or "{}").get("task", {})
            role, index = task.get("type", ""), task.get("index", "")
        except (ValueError, AttributeError):
            pass
    return {"cluster": env.get(CLUSTER, ""), "role": role,
            "index": int(index) if str(index).isdigit() else None}
