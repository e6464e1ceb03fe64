"""The rules the charts, the pods' programs and tfhelm share (names, patterns, limits, label
keys, the task's environment), written once in the tf-cluster chart's library
(charts/tf-cluster/charts/tf-cluster-lib/files/contract.yaml), which its templates read.

Standard library only: the programs the chart runs in pods import this too. They read the
contract as JSON (`make chart-files` writes it beside the programs, and the chart mounts it
beside them); tfhelm reads the same JSON from the chart directory."""

from __future__ import annotations

import json
import os
import re
from functools import cache
from pathlib import Path

LIBRARY = ("charts", "tf-cluster-lib")
# The JSON copy of contract.yaml beside the programs a pod runs (files/task/ in the chart).
JSON_NAME = "contract.json"


def charts_dir() -> Path:
    """`TFHELM_CHARTS_DIR`, else the charts installed with the package (a wheel carries
    them as `tfhelm/charts/`), else the source checkout's `charts/` next to the package."""
    env = os.environ.get("TFHELM_CHARTS_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    installed = here / "charts"
    return installed if (installed / "tf-cluster" / "Chart.yaml").is_file() else here.parent / "charts"


def json_path() -> Path:
    """Beside this module in a pod (the chart mounts both in one directory), else the chart's."""
    beside = Path(__file__).resolve().parent / JSON_NAME
    if beside.is_file():
        return beside
    return charts_dir().joinpath("tf-cluster", *LIBRARY, "files", "task", JSON_NAME)


@cache
def contract() -> dict:
    return json.loads(json_path().read_text(encoding="utf-8"))


def limit(name: str) -> int:
    return contract()["limits"][name]


def label(name: str) -> str:
    return contract()["labels"][name]


def annotation(name: str) -> str:
    return contract()["annotations"][name]


def env(name: str) -> str:
    """The name of a variable of the task's environment (section `env`)."""
    return contract()["env"][name]


def task(name: str):
    return contract()["task"][name]


@cache
def regex(name: str) -> re.Pattern:
    """A pattern of the contract, for `fullmatch` (as Go and JSON Schema match it anchored)."""
    return re.compile(contract()["patterns"][name])


# The label keys tfhelm selects and reads objects by.
CLUSTER_LABEL, ROLE_LABEL, TASK_INDEX_LABEL = (label(k) for k in ("cluster", "role", "taskIndex"))

# Kueue (the chart's `queue` values): the worker Job's labels, and the scheduling gate the
# other roles' pods carry until the workers are admitted (docs/queue.md).
_QUEUE = contract()["queue"]
QUEUE_LABEL, PRIORITY_LABEL, QUEUE_GATE = _QUEUE["nameLabel"], _QUEUE["priorityLabel"], _QUEUE["gate"]
KUEUE_JOB_UID = _QUEUE["jobUidLabel"]  # on the Workload Kueue makes for a Job
GATED_ROLES = tuple(_QUEUE["gatedRoles"])
