"""An API server in memory, under the real `Kube`: its one-object methods send their real
requests (verb, path, body) and get the answers a real API server gives (404, 409 on a name
taken or a stale resourceVersion, a precondition, label selectors, a Secret's stringData).
`refuse` makes one request fail with a status, `down` makes every request fail as a lost
connection does."""

from __future__ import annotations

import base64
import itertools
import json
from urllib.parse import parse_qs, urlsplit

import urllib3
from kubernetes import client
from kubernetes.client.rest import RESTResponse
from urllib3.exceptions import MaxRetryError

from tfhelm.kube import Kube


class FakeApiServer(client.ApiClient):
    def __init__(self) -> None:
        super().__init__(client.Configuration(host="http://fake-apiserver"))
        self.objects: dict[str, dict | str] = {}  # by path; a str is a log
        self.calls: list[str] = []  # "POST /api/v1/namespaces"
        self.refuse: dict[str, tuple[int, str]] = {}  # "GET /api/v1/..." -> (status, message)
        self.down = False
        self._versions = itertools.count(1)

    def put(self, path: str, obj: dict) -> dict:
        """Store an object as if someone else made it."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._versions)}")
        meta["resourceVersion"] = str(next(self._versions))
        if "stringData" in obj:
            obj["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in obj.pop("stringData").items()}
        self.objects[path] = obj
        return obj

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        parts = urlsplit(url)
        path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
        self.calls.append(f"{method} {path}")
        if self.down:
            raise MaxRetryError(None, url, "connection refused")
        if f"{method} {path}" in self.refuse:
            return _status(*self.refuse[f"{method} {path}"])
        status, answer = self._answer(method, path, query, body)
        return _response(status, answer)

    def _answer(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, dict]:
        found = self.objects.get(path)
        if method == "POST":
            path = f"{path}/{body['metadata']['name']}"
            if path in self.objects:
                return 409, _status_body(409, "AlreadyExists")
            return 201, self.put(path, json.loads(json.dumps(body)))
        if method == "GET" and found is None and _is_collection(path):
            items = [o for p, o in sorted(self.objects.items())
                     if p.rsplit("/", 1)[0] == path and _selected(o, query.get("labelSelector"))
                     and _fields(o, query.get("fieldSelector"))]
            return 200, {"kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}
        if found is None:
            return 404, _status_body(404, "NotFound")
        if method == "GET":
            return 200, found
        if method == "DELETE":
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid and uid != found["metadata"]["uid"]:
                return 409, _status_body(409, "Conflict")
            for p in [p for p in self.objects if p == path or p.startswith(path + "/")]:
                del self.objects[p]  # a namespace goes with everything in it
            return 200, _status_body(200, "Success")
        if method == "PATCH" and isinstance(body, list):  # a JSON patch: its `test` and `remove`
            obj = json.loads(json.dumps(found))
            for op in body:
                *parents, last = op["path"].strip("/").split("/")
                node = obj
                for key in parents:
                    node = node[int(key)] if isinstance(node, list) else node[key]
                at = int(last) if isinstance(node, list) else last
                if op["op"] == "test" and node[at] != op["value"]:
                    return 422, _status_body(422, "Invalid", "the test failed")
                if op["op"] == "remove":
                    del node[at]
            return 200, self.put(path, obj)
        if method == "PATCH":  # a merge patch
            return 200, self.put(path, _merged(found, body))
        if method == "PUT":
            if body["metadata"].get("resourceVersion") != found["metadata"]["resourceVersion"]:
                return 409, _status_body(409, "Conflict")
            body = json.loads(json.dumps(body))
            body["metadata"]["uid"] = found["metadata"]["uid"]
            return 200, self.put(path, body)
        raise AssertionError(f"{method} {path}")


def served(server: FakeApiServer) -> Kube:
    """The real Kube, talking to `server`."""
    return Kube(api=server)


def _is_collection(path: str) -> bool:
    from tfhelm.kuberest import _RESOURCES

    return path.rsplit("/", 1)[-1] in {resource for _, resource in _RESOURCES.values()}


def _selected(obj: dict, selector: str | None) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    return True


def _fields(obj: dict, selector: str | None) -> bool:
    """Field selectors (`type=...`, `status.phase=...`, `spec.nodeName!=`)."""
    for term in filter(None, (selector or "").split(",")):
        path, op, value = term.partition("!=") if "!=" in term else term.partition("=")
        node = obj
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if (str(node or "") == value) != (op == "="):
            return False
    return True


def _merged(obj: dict, patch: dict) -> dict:
    out = dict(obj)
    for k, v in patch.items():
        out[k] = _merged(out.get(k) or {}, v) if isinstance(v, dict) else v
    return out


def _status_body(code: int, reason: str, message: str = "") -> dict:
    return {"kind": "Status", "apiVersion": "v1", "code": code, "reason": reason, "message": message or reason}


def _status(code: int, message: str) -> RESTResponse:
    return _response(code, _status_body(code, "Refused", message))


def _response(status: int, body: dict | str) -> RESTResponse:
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()  # a str: a log
    resp = RESTResponse(urllib3.HTTPResponse(body=data, status=status, headers={"Content-Type": "application/json"},
                                             preload_content=True))
    resp.read()
    return resp
