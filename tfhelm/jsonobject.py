"""The API's JSON read like a client model, so the pure code (training.job_row, status)
reads alike what either door returns, plain JSON: tfhelm.kube's (the CLI) and
tfhelm.pod.apiserver's (the in-cluster reaper, standard library only). The domain code that
hands objects to the pure code wraps them (tfhelm/cluster/objects.py, the reapers' clients)."""

from __future__ import annotations

import re
from datetime import datetime


class JsonObject:
    """`job.status.completion_time` is status.completionTime, timestamps are datetimes, a
    missing field is None; labels and annotations stay plain dicts, as in the models."""

    __slots__ = ("_d",)
    MAPS = ("labels", "annotations")

    def __init__(self, d: dict):
        self._d = d

    def __getattr__(self, name: str):
        key = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)
        return _model_like(key, self._d.get(key))


def _model_like(key: str, value):
    if isinstance(value, dict):
        return value if key in JsonObject.MAPS else JsonObject(value)
    if isinstance(value, list):
        return [_model_like("", v) for v in value]
    if isinstance(value, str) and key.endswith(("Time", "Timestamp")):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value
