"""List, then watch, one kind of object in a background thread, onto a queue that a main
loop reads: what the reaper does with a cluster's Jobs and Succeeded pods, and `tfhelm up
--wait` with those and the PS Deployments. A feed resumes from the last resourceVersion,
lists again on 410 Gone, and backs off while the API server is away. Standard library only:
the in-cluster reaper runs this too, with its own door to the API server."""

from __future__ import annotations

import queue
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from tfhelm.errors import Gone

# Server-side watch timeout: the API server ends the watch and we resume it from the last
# resourceVersion; the client-side read timeout above it catches half-open connections.
WATCH_SECONDS = 240


@dataclass(frozen=True)
class Listed:
    """A fresh list (at start, after 410 Gone, after the API server was away)."""
    feed: str
    items: list


@dataclass(frozen=True)
class Changed:
    feed: str
    kind: str  # ADDED, MODIFIED or DELETED
    obj: object


@dataclass(frozen=True)
class Note:
    """A line to log as it is."""
    line: str


@dataclass(frozen=True)
class WatchFailed:
    """The watch broke (the API server away, a connection dropped); it is retried."""
    reason: str


@dataclass(frozen=True)
class Fatal:
    """Retrying cannot help (RBAC): the loop stops with this error."""
    error: Exception


Lister = Callable[[], tuple[list, str]]
Watcher = Callable[[str, int], Iterator[tuple[str, object, str]]]  # (rv, timeout) -> (type, obj, rv)
# An error retrying cannot cure (RBAC's refusal) -> the error to stop with; None: retry.
Refused = Callable[[Exception], Exception | None]


class Feed:
    """One kind of object (`name`, e.g. "jobs") onto `events`, until `stop` is set.
    `refused` tells the errors retrying cannot cure (the door's: RBAC). `optional`: a feed the
    main loop can do without; when RBAC refuses it, it says so in a Note and ends instead of
    stopping the loop with Fatal."""

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
                    raise ConnectionError("watch ended at once")  # don't spin: back off
            except Gone:
                self.events.put(Note(f"watch expired (410 Gone); listing {self.what} again"))
                rv = None
            except Exception as e:  # the API server went away, a connection dropped...
                if self.stop.is_set():
                    return
                refusal = self.refused(e)
                if refusal is not None:  # retrying cannot help
                    self.events.put(Note(self.optional) if self.optional else Fatal(refusal))
                    return
                self.events.put(WatchFailed(f"{type(e).__name__}: {e}".splitlines()[0][:200]))
                self.stop.wait(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self.backoff[1])
                rv = None  # list again: the state is fresh and the connection proven


def end(feeds: list[Feed], stop_watch: Callable[[], None], timeout: float = 10) -> None:
    """Stop the feeds and wait for their threads: a thread still blocked in a TLS read when
    the interpreter exits can abort the process (exit 134). A watch request that was just
    being sent when stop came has no connection to close yet: ask again."""
    for f in feeds:
        f.stop.set()
    deadline = time.monotonic() + timeout
    while any(f.thread.is_alive() for f in feeds) and time.monotonic() < deadline:
        stop_watch()
        for f in feeds:
            f.thread.join(0.1)
