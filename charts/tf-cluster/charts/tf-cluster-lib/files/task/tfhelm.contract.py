# tfhelm/contract.py without its prose (make chart-files)
from __future__ import annotations
import json
import os
import re
from functools import cache
from pathlib import Path
LIBRARY = ("charts", "tf-cluster-lib")
JSON_NAME = "contract.json"
def charts_dir() -> Path:
    env = os.environ.get("TFHELM_CHARTS_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    installed = here / "charts"
    return installed if (installed / "tf-cluster" / "Chart.yaml").is_file() else here.parent / "charts"
def json_path() -> Path:
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
    return contract()["env"][name]
def task(name: str):
    return contract()["task"][name]
@cache
def regex(name: str) -> re.Pattern:
    return re.compile(contract()["patterns"][name])
CLUSTER_LABEL, ROLE_LABEL, TASK_INDEX_LABEL = (label(k) for k in ("cluster", "role", "taskIndex"))
_QUEUE = contract()["queue"]
QUEUE_LABEL, PRIORITY_LABEL, QUEUE_GATE = _QUEUE["nameLabel"], _QUEUE["priorityLabel"], _QUEUE["gate"]
KUEUE_JOB_UID = _QUEUE["jobUidLabel"]
GATED_ROLES = tuple(_QUEUE["gatedRoles"])
