"""What goes on the reaper's queue beside the feeds' events (tfhelm.cluster.feed): a pool
thread's action done, a further rule's action done, the stop; and the loop's memory of one
training run. Standard library only (shipped to the in-cluster reaper)."""

from __future__ import annotations

from dataclasses import dataclass

from tfhelm.cluster.feed import Changed, Fatal, Listed, Note, WatchFailed
from tfhelm.reaper.protocol import Rule
from tfhelm.reaper.rules import Decision, Result


@dataclass(frozen=True)
class ActionDone:
    """An action of a pool thread ended: a result (KEEP, REAP), nothing (GRACE) or an error."""
    decision: Decision
    result: Result | None = None
    error: Exception | None = None


@dataclass(frozen=True)
class RuleDone:
    """An action of a further rule ended: a line to log, or an error."""
    rule: Rule
    action: object
    line: str | None = None
    error: Exception | None = None


@dataclass(frozen=True)
class Stop:
    pass


Event = Listed | Changed | Note | WatchFailed | Fatal | ActionDone | RuleDone | Stop


@dataclass
class Running:
    """The reaper's memory of one training run (a decisive Job uid and its outcome)."""
    observed: float | None = None  # when the outcome arrived while we watched
    announced: bool = False  # the TFClusterReaping Event was emitted
    result: Result | None = None
