"""A task's TF_CONFIG, composed in the pod.

Pods carry no TF_CONFIG: it lists every task, so it grows with the cluster, and so would
every pod template. They get the cluster spec file (per role a host pattern and a count, the
same few hundred bytes at any size) plus the task's type and index; `resolve_tf_config`
expands them into TF_CONFIG (`expand_cluster`, the one expansion tfhelm itself uses too) and
puts it into os.environ, so TensorFlow's cluster resolvers and the user's script find it
where they always look.
"""

from __future__ import annotations

import json
import os

from tfhelm import contract

ROLES = ("chief", "worker", "ps", "evaluator")
INDEX = "{index}"  # where a role's host pattern takes the task index
SPEC_FILE, TASK_TYPE, TASK_INDEX = (contract.env(k) for k in ("clusterSpecFile", "taskType", "taskIndex"))


class LaunchError(Exception):
    """The task's environment does not describe a task of a TF cluster."""


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

    path = env.get(SPEC_FILE, "")
    if not path:
        raise LaunchError(f"neither TF_CONFIG nor {SPEC_FILE} is set")
    cluster = read_spec(path)
    task_type = env.get(TASK_TYPE, "")
    index = env.get(TASK_INDEX, "")
    if not task_type or not index.isdigit():
        raise LaunchError(f"TF_CONFIG is not set, so {TASK_TYPE} and a numeric "
                          f"{TASK_INDEX} are needed (got {task_type!r}, {index!r})")
    config = {"cluster": cluster, "task": {"type": task_type, "index": int(index)}}
    _check(config, f"the cluster spec {path} with {TASK_TYPE}/{TASK_INDEX}")
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
