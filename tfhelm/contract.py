"""The rules the charts and tfhelm share (names, patterns, limits, label keys), read from the
tf-cluster chart's library (charts/tf-cluster/charts/tf-cluster-lib/files/contract.yaml),
which its templates and both charts' schemas read too."""

from __future__ import annotations

import re
from functools import cache

from tfhelm import yamlio
from tfhelm.chart import chart_path

LIBRARY = ("charts", "tf-cluster-lib")


@cache
def contract() -> dict:
    return yamlio.load(chart_path("tf-cluster").joinpath(*LIBRARY, "files", "contract.yaml").read_text())


def limit(name: str) -> int:
    return contract()["limits"][name]


def label(name: str) -> str:
    return contract()["labels"][name]


@cache
def regex(name: str) -> re.Pattern:
    """A pattern of the contract, for `fullmatch` (as Go and JSON Schema match it anchored)."""
    return re.compile(contract()["patterns"][name])


# The label keys tfhelm selects and reads objects by.
CLUSTER_LABEL, ROLE_LABEL, TASK_INDEX_LABEL = (label(k) for k in ("cluster", "role", "taskIndex"))
