"""The pods' door to the Kubernetes API server, with the standard library alone: HTTPS with the
pod's ServiceAccount token and CA (re-read for every request: the kubelet rotates the token),
JSON in and out, lists page by page, watches as a stream of events that `stop()` ends from
another thread. The in-cluster reaper talks to the API server through this only; tfhelm's CLI
has its own door (tfhelm.kube, the official client)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
from typing import Iterator
from urllib.parse import urlencode, urlsplit

from tfhelm.errors import Gone

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# Pods read as metadata only (labels, annotations, owners: all the training rule needs of a
# Succeeded pod, about a fifth of its JSON), the phase being in the field selector.
SUCCEEDED = "status.phase=Succeeded"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
PAGE = 100
LINE_MAX = 16 << 20  # one watch event; a Job's JSON is a few kB


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, method: str, path: str, message: str):
        self.status, self.method, self.path = status, method, path
        super().__init__(f"{method} {path}: {status} {message}")


def in_cluster_server() -> str:
    """The API server as a pod sees it (the variables the kubelet sets in every container)."""
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


class ApiServer:
    """`server`: the API server's URL (default: the pod's, as the kubelet tells it); https with
    the CA file, or http for a local proxy (`kubectl proxy`) or a test's stand-in."""

    def __init__(self, server: str | None = None, token_file: str = f"{SERVICE_ACCOUNT}/token",
                 ca_file: str = f"{SERVICE_ACCOUNT}/ca.crt", timeout: float = 30):
        url = urlsplit(server or in_cluster_server())
        self.host, self.port = url.hostname, url.port or (80 if url.scheme == "http" else 443)
        self.token_file, self.timeout = token_file, timeout
        self.tls = None if url.scheme == "http" else ssl.create_default_context(cafile=ca_file)
        self._open: set[http.client.HTTPConnection] = set()
        self._stopped = False
        self._lock = threading.Lock()

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.tls is None:
            return http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)

    def _headers(self, accept: str, content_type: str | None) -> dict:
        try:
            with open(self.token_file, encoding="utf-8") as f:
                auth = {"Authorization": f"Bearer {f.read().strip()}"}
        except FileNotFoundError:  # a proxy that authenticates for us
            auth = {}
        return {**auth, "Accept": accept, **({"Content-Type": content_type} if content_type else {})}

    def request(self, method: str, path: str, body: dict | None = None, *, query: dict | None = None,
                accept: str = "application/json", content_type: str = "application/json",
                timeout: float | None = None) -> dict:
        """One request; its answer as JSON. Raises ApiError for an error status, OSError (and
        http.client's errors) when the server does not answer."""
        target = path + (f"?{urlencode({k: v for k, v in query.items() if v is not None})}" if query else "")
        conn = self._connect(timeout or self.timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, target, data, self._headers(accept, content_type if data else None))
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        if not 200 <= resp.status <= 299:
            raise ApiError(resp.status, method, path, _message(raw) or resp.reason)
        return json.loads(raw) if raw else {}

    def list(self, path: str, *, accept: str = "application/json", **query) -> tuple[list[dict], str]:
        """Every object at `path` (page by page) and the list's resourceVersion, to watch from."""
        items, version, token = [], "", None
        while True:
            page = self.request("GET", path, query={"limit": PAGE, "continue": token, **query}, accept=accept)
            items += page.get("items") or []
            version = version or page["metadata"]["resourceVersion"]  # the snapshot of page 1
            token = page["metadata"].get("continue")
            if not token:
                return items, version

    def watch(self, path: str, resource_version: str, timeout: int, *, accept: str = "application/json",
              **query) -> Iterator[tuple[str, dict | None, str]]:
        """(type, object or None for a bookmark, resourceVersion) from `resource_version`
        on, until the server ends the watch (after `timeout` s) or `stop()`; Gone on 410."""
        query = {**query, "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(timeout)}
        conn = self._connect(timeout + 30)  # a read that long means a half-open connection
        with self._lock:
            if self._stopped:
                return
            self._open.add(conn)
        try:
            conn.request("GET", f"{path}?{urlencode({k: v for k, v in query.items() if v is not None})}",
                         headers=self._headers(accept, None))
            if self._stopped:  # stopped while connecting: no socket was there to shut down
                return
            resp = conn.getresponse()
            if resp.status != 200:
                message = _message(resp.read()) or resp.reason
                if resp.status == 410:
                    raise Gone(message)
                raise ApiError(resp.status, "WATCH", path, message)
            version = resource_version
            while line := resp.readline(LINE_MAX):
                event = json.loads(line)
                kind, obj = event["type"], event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone(obj.get("message", ""))
                    raise ApiError(obj.get("code", 500), "WATCH", path, obj.get("message", ""))
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                yield kind, None if kind == "BOOKMARK" else obj, version
        except (OSError, http.client.HTTPException):
            if not self._stopped:
                raise
        finally:
            with self._lock:
                self._open.discard(conn)
            conn.close()

    def stop(self) -> None:
        """End every watch, now and later: the socket's shutdown wakes a blocked read."""
        with self._lock:
            self._stopped = True
            running = list(self._open)
        for conn in running:
            if conn.sock is not None:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _message(raw: bytes) -> str:
    """A Status object's message, else the start of the body."""
    try:
        return json.loads(raw).get("message") or ""
    except (ValueError, AttributeError):
        return raw[:200].decode("utf-8", "replace")
