# tfhelm/reaper/messages.py without its prose (make chart-files)
from __future__ import annotations
from dataclasses import dataclass
from tfhelm.cluster.feed import Changed, Fatal, Listed, Note, WatchFailed
from tfhelm.reaper.protocol import Rule
from tfhelm.reaper.rules import Decision, Result
@dataclass(frozen=True)
class ActionDone:
    decision: Decision
    result: Result | None = None
    error: Exception | None = None
@dataclass(frozen=True)
class RuleDone:
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
    observed: float | None = None
    announced: bool = False
    result: Result | None = None
