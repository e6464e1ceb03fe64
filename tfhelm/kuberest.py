"""The API server's requests by kind, through the kubernetes client's connection (auth,
TLS) but not its generated API classes, in one error idiom: the generic half of the door.
Kube (tfhelm/kube.py) builds its typed requests on it."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Callable, Iterator, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from tfhelm.apierrors import api_error
from tfhelm.errors import ClusterUnreachable, TfhelmError
from tfhelm.kubeconfig import load_config
from tfhelm.pod.apiserver import METADATA_LIST
from tfhelm.watches import Watches

T = TypeVar("T")
# Items per page of a raw list: one page is in memory at a time (100 pods: ~1 MB of JSON;
# at 500 the peak RSS of `status` at 1,024 pods was 107 MiB, at 100 it is 64 MiB, same CPU).
PAGE = 100
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"


class KubeRest:
    """Requests by kind (the kinds in _RESOURCES) and by path. Connects on first use, so bad
    input is reported before a missing cluster is."""

    def __init__(self, api: client.ApiClient | None = None, kubeconfig: str | None = None):
        self._api, self._kubeconfig = api, kubeconfig

    @cached_property
    def api(self) -> client.ApiClient:
        return self._api or load_config(self._kubeconfig)

    def get_json(self, path: str, accept: str = "application/json", timeout=None, **query) -> dict:
        """GET an API path as JSON through the configured client (auth, TLS), without the
        generated API classes: importing those builds hundreds of pydantic models (~2 s of
        CPU), and decoding into them costs many times json.loads."""
        return json.loads(self._request("GET", path, accept=accept, timeout=timeout, **query).read())

    def request_json(self, method: str, path: str, body: dict | None = None,
                     content_type: str = "application/json", timeout=None, **query) -> dict:
        """One request with a JSON body and answer (see get_json); raises ApiException."""
        return json.loads(self._request(method, path, body, content_type=content_type, timeout=timeout,
                                        **query).read())

    def _request(self, method: str, path: str, body: dict | None = None, accept: str = "application/json",
                 timeout=None, content_type: str = "application/json", **query):
        """One request (see get_json); raises ApiException. The body of a success is not read
        yet: a watch streams it."""
        params = [(k, v) for k, v in query.items() if v is not None]
        headers = {"Accept": accept, **({"Content-Type": content_type} if body is not None else {})}
        request = self.api.param_serialize(method, path, query_params=params, auth_settings=["BearerToken"],
                                           header_params=headers, body=body)
        resp = self.api.call_api(*request, _request_timeout=timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=resp.data.decode(errors="replace"), data=None)
        return resp

    def _pages(self, path: str, accept: str = "application/json", timeout=None, limit: int = PAGE,
               **query) -> Iterator[dict]:
        token = None
        while True:
            page = self.get_json(path, accept, timeout, limit=limit, **{"continue": token}, **query)
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    # --- A feed's list and watch (cluster/feed.py) ----------------------------------------
    # Objects as JSON. These raise as the client does (ApiException, urllib3's errors, Gone
    # on 410): a feed retries them, or stops on a refusal (apierrors.forbidden) with the error
    # made user-facing once.

    def listing(self, kind: str, namespace: str, selector: str, *, fields: str | None = None,
                accept: str = "application/json") -> tuple[list[dict], str]:
        """The objects of a kind with these labels (JSON, paged) and the list's
        resourceVersion, to watch from. A page never hangs (30 s)."""
        items, version = [], ""
        for page in self._pages(path_of(kind, namespace), accept, 30, labelSelector=selector, fieldSelector=fields):
            items += page.get("items") or []
            version = version or page["metadata"]["resourceVersion"]  # the snapshot of page 1
        return items, version

    def watch(self, watches: Watches, kind: str, namespace: str, selector: str, resource_version: str,
              timeout: int, *, fields: str | None = None,
              accept: str = "application/json") -> Iterator[tuple[str, dict | None, str]]:
        """Watch the objects of a kind with these labels from `resource_version` (see
        Watches.stream), objects as JSON."""
        path = path_of(kind, namespace)

        def request(*, watch, resource_version, allow_watch_bookmarks, timeout_seconds, _preload_content,
                    _request_timeout):
            return self._request("GET", path, accept=accept, timeout=_request_timeout, watch="true",
                                 resourceVersion=resource_version, allowWatchBookmarks="true",
                                 timeoutSeconds=str(timeout_seconds), labelSelector=selector,
                                 fieldSelector=fields).response
        return watches.stream(request, resource_version=resource_version, timeout=timeout)

    # --- One object at a time, one error idiom ---------------------------------------------
    # Objects are the API's JSON (plain dicts). A missing object is None (False where the
    # method answers a yes or no); anything else the API server refuses is a typed error
    # naming the object (apierrors.api_error: Forbidden for RBAC's 401/403, else TfhelmError),
    # and a server that does not answer is ClusterUnreachable.

    def _answer(self, what: str, request: Callable[[], T], absent: tuple[int, ...] = (404,)) -> T | None:
        """One request's answer; None when the API server answers one of the `absent`
        statuses (404: no such object; 409 for a create: one of that name exists)."""
        try:
            return request()
        except ApiException as err:
            if err.status in absent:
                return None
            raise api_error(err, what) from err
        except (HTTPError, OSError) as err:
            raise ClusterUnreachable(f"{self.api.configuration.host}: {type(err).__name__} ({what})") from err

    def _one(self, method: str, kind: str, namespace: str | None, name: str, body: dict | list | None = None, *,
             absent: tuple[int, ...] = (404,), content_type: str = "application/json",
             timeout: float | None = None, query: dict | None = None) -> dict | None:
        """One request about one object (a create names the collection: its name is the body's)."""
        path = path_of(kind, namespace, None if method == "POST" else name)
        return self._answer(subject(kind, namespace, name), lambda: self.request_json(
            method, path, body, content_type=content_type, timeout=timeout, **(query or {})), absent)

    def each(self, kind: str, namespace: str | None, selector: str | None = None, *, fields: str | None = None,
             accept: str = "application/json", timeout: float | None = None, page: int = PAGE) -> Iterator[dict]:
        """The objects of a kind (None: in every namespace) with these labels and fields,
        `page` at a time: one page is in memory at a time (the next is asked for when read)."""
        what = _RESOURCES[kind][1] + (f" in {namespace}" if namespace else "")
        pages = self._pages(path_of(kind, namespace), accept, timeout, page, labelSelector=selector,
                            fieldSelector=fields)
        while (listed := self._answer(what, lambda: next(pages, None), absent=())) is not None:
            yield from listed.get("items") or []

    def items(self, kind: str, namespace: str | None, selector: str | None = None, **options) -> list[dict]:
        """The objects of a kind with these labels (see each), all at once."""
        return list(self.each(kind, namespace, selector, **options))

    def _create(self, kind: str, namespace: str | None, obj: dict, timeout: float | None = None) -> dict | None:
        """The object created; None when one of that name exists."""
        return self._one("POST", kind, namespace, obj["metadata"]["name"], obj, absent=(409,), timeout=timeout)

    def metadata(self, kind: str, namespace: str | None, selector: str | None = None, *,
                 optional: bool = False) -> list[dict]:
        """The metadata (JSON) of the objects of a kind with these labels. `optional`: a kind
        this server does not serve (a CRD not installed) or this client may not list is none."""
        try:
            return [o["metadata"] for o in self.items(kind, namespace, selector, accept=METADATA_LIST)]
        except TfhelmError as err:
            status = getattr(err.__cause__, "status", None)
            if optional and status in (403, 404):
                return []
            raise

    def delete(self, kind: str, namespace: str | None, name: str, propagation: str | None = "Background",
               timeout: float | None = None) -> bool:
        """Delete one object of any kind the facade serves, its dependents as `propagation`
        says (None: the API's default for the kind); False when there was none."""
        options = None if propagation is None else {
            "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        return self._one("DELETE", kind, namespace, name, options, timeout=timeout) is not None

    def read(self, kind: str, namespace: str | None, name: str) -> dict | None:
        """One object of any kind the facade serves; None when there is none."""
        return self._one("GET", kind, namespace, name)


# Kind -> (API path prefix, resource): the kinds the facade serves.
_RESOURCES = {
    "Namespace": ("/api/v1", "namespaces"),
    "Node": ("/api/v1", "nodes"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Event": ("/api/v1", "events"),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims"),
    "Pod": ("/api/v1", "pods"),
    "Secret": ("/api/v1", "secrets"),
    "Service": ("/api/v1", "services"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "Job": ("/apis/batch/v1", "jobs"),
    "Ingress": ("/apis/networking.k8s.io/v1", "ingresses"),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases"),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
    "ServiceAccount": ("/api/v1", "serviceaccounts"),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    "ResourceQuota": ("/api/v1", "resourcequotas"),
    "LimitRange": ("/api/v1", "limitranges"),
    "StorageClass": ("/apis/storage.k8s.io/v1", "storageclasses"),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1", "priorityclasses"),
    "PodMonitor": ("/apis/monitoring.coreos.com/v1", "podmonitors"),
    "PrometheusRule": ("/apis/monitoring.coreos.com/v1", "prometheusrules"),
    # Kubernetes' own gang scheduling (alpha in 1.36; tf-cluster `gang.enabled`, docs/gang.md).
    "PodGroup": ("/apis/scheduling.k8s.io/v1alpha2", "podgroups"),
    # Kueue's (when it is installed): the queue of a cluster (docs/queue.md).
    "Workload": (KUEUE_API, "workloads"),
    "LocalQueue": (KUEUE_API, "localqueues"),
    "ClusterQueue": (KUEUE_API, "clusterqueues"),
    "WorkloadPriorityClass": (KUEUE_API, "workloadpriorityclasses"),
    "ResourceFlavor": (KUEUE_API, "resourceflavors"),
}


def path_of(kind: str, namespace: str | None, name: str | None = None) -> str:
    prefix, resource = _RESOURCES[kind]
    scope = ("namespaces", namespace) if namespace else ()
    return "/".join([prefix, *scope, resource, *((name,) if name else ())])


def subject(kind: str, namespace: str | None, name: str) -> str:
    """How an error names the object: `Secret team-a/x`, `Namespace team-a`."""
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
