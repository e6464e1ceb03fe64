"""Watches of the API server (the kubernetes client's Watch) that another thread can stop."""

from __future__ import annotations

import threading
from typing import Iterator

from tfhelm.errors import Gone


class Watches:
    """Watches (the client's Watch) that `stop()` ends from another thread: the one running
    now and any later one. Watch.stop() shuts the connection's socket down, which wakes the
    thread blocked reading it; a watch whose request is still being sent has no connection
    yet, so a caller asks again until its thread ended."""

    def __init__(self) -> None:
        self._open: set = set()
        self._stopped = False
        self._lock = threading.Lock()

    def stream(self, func, *args, resource_version: str, timeout: int,
               **kwargs) -> Iterator[tuple[str, dict | None, str]]:
        """Yields (type, object as the API's JSON or None for a bookmark, resourceVersion);
        raises Gone on 410."""
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        w = watch.Watch(return_type="object")
        with self._lock:
            if self._stopped:  # stopped before this watch began
                return
            self._open.add(w)
        try:
            for ev in w.stream(func, *args, resource_version=resource_version, allow_watch_bookmarks=True,
                               timeout_seconds=timeout, _request_timeout=(10, timeout + 30), **kwargs):
                yield ev["type"], None if ev["type"] == "BOOKMARK" else ev["object"], w.resource_version
        except ApiException as e:
            if e.status == 410:
                raise Gone(str(e.reason)) from e
            raise
        finally:
            with self._lock:
                self._open.discard(w)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            running = list(self._open)
        for w in running:
            w.stop()
