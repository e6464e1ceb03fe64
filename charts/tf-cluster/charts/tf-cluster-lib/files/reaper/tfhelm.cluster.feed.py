# tfhelm/cluster/feed.py without its prose (make chart-files)
from __future__ import annotations
import queue
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator
from tfhelm.errors import Gone
WATCH_SECONDS = 240
@dataclass(frozen=True)
class Listed:
    feed: str
    items: list
@dataclass(frozen=True)
class Changed:
    feed: str
    kind: str
    obj: object
@dataclass(frozen=True)
class Note:
    line: str
@dataclass(frozen=True)
class WatchFailed:
    reason: str
@dataclass(frozen=True)
class Fatal:
    error: Exception
Lister = Callable[[], tuple[list, str]]
Watcher = Callable[[str, int], Iterator[tuple[str, object, str]]]
Refused = Callable[[Exception], Exception | None]
class Feed:
    def __init__(self, name: str, what: str, lister: Lister, watcher: Watcher, events: queue.Queue,
                 stop: threading.Event, backoff: tuple[float, float] = (0.2, 5.0), optional: str = "",
                 refused: Refused = lambda e: None):
        self.name, self.what, self.lister, self.watcher = name, what, lister, watcher
        self.events, self.stop, self.backoff, self.optional = events, stop, backoff, optional
        self.refused = refused
        self.thread = threading.Thread(target=self._run, name=f"tfhelm-watch-{name}", daemon=True)
    def start(self) -> "Feed":
        self.thread.start()
        return self
    def _run(self) -> None:
        rv, delay = None, self.backoff[0]
        while not self.stop.is_set():
            try:
                if rv is None:
                    items, rv = self.lister()
                    self.events.put(Listed(self.name, items))
                started, got = time.monotonic(), False
                for kind, obj, new_rv in self.watcher(rv, WATCH_SECONDS):
                    if self.stop.is_set():
                        return
                    rv, got, delay = new_rv or rv, True, self.backoff[0]
                    if obj is not None and kind in ("ADDED", "MODIFIED", "DELETED"):
                        self.events.put(Changed(self.name, kind, obj))
                if not got and time.monotonic() - started < 1:
                    raise ConnectionError("watch ended at once")
            except Gone:
                self.events.put(Note(f"watch expired (410 Gone); listing {self.what} again"))
                rv = None
            except Exception as e:
                if self.stop.is_set():
                    return
                refusal = self.refused(e)
                if refusal is not None:
                    self.events.put(Note(self.optional) if self.optional else Fatal(refusal))
                    return
                self.events.put(WatchFailed(f"{type(e).__name__}: {e}".splitlines()[0][:200]))
                self.stop.wait(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self.backoff[1])
                rv = None
def end(feeds: list[Feed], stop_watch: Callable[[], None], timeout: float = 10) -> None:
    for f in feeds:
        f.stop.set()
    deadline = time.monotonic() + timeout
    while any(f.thread.is_alive() for f in feeds) and time.monotonic() < deadline:
        stop_watch()
        for f in feeds:
            f.thread.join(0.1)
