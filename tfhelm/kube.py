"""The Kubernetes API, through the official client: only what the CLI needs."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Callable, Iterator, TypeVar

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from tfhelm.apierrors import access_denied, api_error, api_message
from tfhelm.contract import CLUSTER_LABEL, KUEUE_JOB_UID, ROLE_LABEL
from tfhelm.errors import AdmissionRefused, ClusterUnreachable, Forbidden, Gone, SpecError, TfhelmError, TimedOut
from tfhelm.jsonobject import JsonObject
from tfhelm.pod.apiserver import MERGE_PATCH, METADATA_LIST, METADATA_WATCH, SUCCEEDED  # both doors ask alike

# Items per page of a raw list: one page is in memory at a time (100 pods: ~1 MB of JSON;
# at 500 the peak RSS of `status` at 1,024 pods was 107 MiB, at 100 it is 64 MiB, same CPU).
PAGE = 100
# The kubeconfig context, shared with Helm: `tfhelm --kube-context` sets it, and Helm itself
# reads it, so the API client and every helm call talk to the same cluster.
CONTEXT_ENV = "HELM_KUBECONTEXT"


def _kubeconfig(kubeconfig: str | None) -> str | None:
    return kubeconfig or os.environ.get("KUBECONFIG")


def _context() -> str | None:
    return os.environ.get(CONTEXT_ENV) or None


def _named_context(kubeconfig: str | None) -> dict | None:
    """The kubeconfig entry of the context asked for (--kube-context); a usage error when the
    kubeconfig has no such context. None when none was asked for or there is no kubeconfig."""
    if not _context():
        return None
    try:
        contexts, _ = config.list_kube_config_contexts(config_file=_kubeconfig(kubeconfig))
    except (config.ConfigException, FileNotFoundError, TypeError):
        return None
    found = next((c for c in contexts if c["name"] == _context()), None)
    if found is None:
        raise SpecError("--kube-context", f"no context '{_context()}' in the kubeconfig",
                        f"one of: {', '.join(c['name'] for c in contexts)}")
    return found


def load_config(kubeconfig: str | None = None) -> client.ApiClient:
    """The kubeconfig (KUBECONFIG or ~/.kube/config), else the in-cluster ServiceAccount."""
    _named_context(kubeconfig)
    try:
        # KUBECONFIG read now, not when the kubernetes package was imported.
        return config.new_client_from_config(config_file=_kubeconfig(kubeconfig), context=_context())
    except (config.ConfigException, FileNotFoundError, TypeError) as err:
        try:
            config.load_incluster_config()
            return client.ApiClient()
        except config.ConfigException:
            raise ClusterUnreachable(f"no kubeconfig: {err}") from err


def current_namespace(kubeconfig: str | None = None) -> str:
    try:
        active = _named_context(kubeconfig) or config.list_kube_config_contexts(
            config_file=_kubeconfig(kubeconfig))[1]
        return active.get("context", {}).get("namespace") or "default"
    except (config.ConfigException, FileNotFoundError, TypeError):
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                return f.read().strip()
        except OSError:
            return "default"


# The field manager Helm 4 applies with (server-side apply): a dry run under the same name
# conflicts only with fields someone else changed since.
HELM_FIELD_MANAGER = "helm"


def apply_conflicts(message: str) -> str | None:
    """A server-side apply conflict as one line (".data.x changed by kubectl-edit"); "" when
    the only other manager is Helm's own (a release Helm 3 installed client-side); None when
    the message is no conflict."""
    m = re.search(r"Apply failed with \d+ conflicts?: (.*)", message, re.S)
    if not m:
        return None
    managers = set(re.findall(r'conflicts? with "([^"]+)"', m.group(1)))
    if not managers - {HELM_FIELD_MANAGER}:
        return ""
    fields = re.findall(r"(?<!\S)(\.\S+)", re.sub(r'conflicts? with "[^"]*"', "", m.group(1)))
    return f"{', '.join(fields) or 'fields'} changed by {', '.join(sorted(managers))}"


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


@dataclass
class ClusterObjects:
    pods: list  # the API's JSON (dicts), as `Kube.task_pods` yields them
    jobs: list  # JsonObjects from here on (read like client models)
    deployments: list
    pvcs: list


class ListedObjects(ClusterObjects):
    """A cluster's objects, each kind listed on first access: a caller that reads only the
    Jobs does not pay for listing every pod."""

    def __init__(self, listers: dict[str, Callable[[], list]]):  # no dataclass fields yet
        self._listers = listers

    def __getattr__(self, kind: str):  # only called while `kind` is not yet an attribute
        lister = self.__dict__.get("_listers", {}).get(kind)
        if lister is None:
            raise AttributeError(kind)
        setattr(self, kind, lister())
        return getattr(self, kind)


class Kube:
    """Connects on first use, so bad input is reported before a missing cluster is."""

    def __init__(self, api: client.ApiClient | None = None, kubeconfig: str | None = None):
        self._api, self._kubeconfig = api, kubeconfig

    @cached_property
    def api(self) -> client.ApiClient:
        return self._api or load_config(self._kubeconfig)

    def ping(self) -> str:
        """The server's version; ClusterUnreachable naming the address tried when it does not
        answer."""
        return self._answer("the API server's version", lambda: self.get_json("/version", timeout=5)["gitVersion"],
                            absent=())

    def ensure_namespace(self, namespace: str) -> bool:
        """Create the namespace if missing; True when this call created it (False when
        another `tfhelm up` made it meanwhile)."""
        return self.read_namespace(namespace) is None and self.create_namespace(namespace)

    def delete_namespace(self, namespace: str) -> bool:
        """Delete it with everything in it; False when there was none."""
        return self._delete("Namespace", None, namespace)

    def _resource(self, obj: dict):
        """The API resource serving an object's kind (discovery once per client)."""
        from kubernetes.dynamic import DynamicClient
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        if "_dynamic" not in self.__dict__:
            self._dynamic = DynamicClient(self.api)
        try:
            return self._dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        except ResourceNotFoundError as err:
            raise TfhelmError(f"this cluster does not serve {obj['kind']} ({obj['apiVersion']})") from err

    def server_side_apply(self, obj: dict, namespace: str | None = None, *, manager: str = "tfhelm",
                          force: bool = True, dry_run: bool = False):
        """Server-side apply of one object (any kind the API server serves)."""
        resource = self._resource(obj)
        return self._dynamic.server_side_apply(
            resource, body=obj, namespace=namespace if resource.namespaced else None,
            field_manager=manager, force_conflicts=force, dry_run="All" if dry_run else None,
            query_params=[("fieldValidation", "Strict")])  # as Helm 4 applies: unknown fields fail

    def dry_run_apply(self, namespace: str, objects: list[dict]) -> list[str]:
        """Server-side apply of every object with dryRun=All, as Helm's own field manager:
        admission (quota, Pod Security, policies) and validation run as for a real apply,
        and nothing is stored. Raises AdmissionRefused naming the first object (in order)
        the API server refuses. Returns the drift: fields someone else changed since Helm
        applied them, one line per object (Helm takes them back: it applies with force).
        The requests run concurrently: each object is checked on its own."""
        from concurrent.futures import ThreadPoolExecutor

        roles = {o["metadata"]["name"] for o in objects if o.get("kind") == "Role"}
        for first in {(o["apiVersion"], o["kind"]): o for o in objects}.values():
            self._resource(first)  # discovery (lazy, per group) before the threads share it
        with ThreadPoolExecutor(min(8, len(objects) or 1)) as pool:
            futures = [pool.submit(self._dry_run_one, namespace, obj, roles) for obj in objects]
        return [d for f in futures if (d := f.result())]

    def _dry_run_one(self, namespace: str, obj: dict, roles: set[str]) -> str | None:
        kind, name = obj.get("kind", "?"), obj.get("metadata", {}).get("name", "?")
        try:
            try:
                self.server_side_apply(obj, namespace, manager=HELM_FIELD_MANAGER, force=False,
                                       dry_run=True)
                return None
            except ApiException as err:
                conflict = apply_conflicts(api_message(err)) if err.status == 409 else None
                if conflict is None:
                    raise
                self.server_side_apply(obj, namespace, manager=HELM_FIELD_MANAGER, dry_run=True)
                return f"{kind} {namespace}/{name}: {conflict}" if conflict else None
        except ApiException as err:
            # A dry run stores nothing: a RoleBinding to a Role of the same release cannot
            # be checked (the RBAC escalation check finds no Role) until the Role exists.
            if err.status == 404 and kind == "RoleBinding" and obj.get("roleRef", {}).get("name") in roles:
                return None
            if access_denied(err):  # RBAC (exit 3); admission's refusals are exit 5
                raise api_error(err, f"{kind} {namespace}/{name}") from err
            raise AdmissionRefused(namespace, kind, name, api_message(err)) from err

    def pvc_names(self, namespace: str, cluster: str) -> set[str]:
        """The cluster's PVCs (by label: a PVC someone else makes meanwhile is not ours)."""
        return {p.metadata.name for p in self.objects(namespace, cluster).pvcs}

    def delete_pvc(self, namespace: str, name: str) -> bool:
        """False when there was none."""
        return self._delete("PersistentVolumeClaim", namespace, name)

    def create_configmap(self, namespace: str, obj: dict) -> bool:
        """Create a ConfigMap; False when one of that name exists (named by its content)."""
        return self._create("ConfigMap", namespace, obj) is not None

    def set_configmap_owner(self, namespace: str, name: str, owner: str) -> None:
        """Make ConfigMap `owner` the owner of ConfigMap `name`: the garbage collector
        deletes it with its owner. Either one missing is an error."""
        uid = self._one("GET", "ConfigMap", namespace, owner, absent=())["metadata"]["uid"]
        owners = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid}]
        self._one("PATCH", "ConfigMap", namespace, name, {"metadata": {"ownerReferences": owners}},
                  absent=(), content_type=MERGE_PATCH)

    def configmap_names(self, namespace: str, selector: str) -> set[str]:
        return {c["metadata"]["name"] for c in self._all("ConfigMap", namespace, selector, accept=METADATA_LIST)}

    def delete_configmap(self, namespace: str, name: str) -> bool:
        """False when there was none."""
        return self._delete("ConfigMap", namespace, name)

    def objects(self, namespace: str, cluster: str) -> ClusterObjects:
        sel = f"{CLUSTER_LABEL}={cluster}"

        def of(kind: str) -> Callable[[], list[JsonObject]]:
            return lambda: [JsonObject(o) for o in self._all(kind, namespace, sel)]
        return ListedObjects({"pods": lambda: list(self.task_pods(namespace, cluster)), "jobs": of("Job"),
                              "deployments": of("Deployment"), "pvcs": of("PersistentVolumeClaim")})

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

    def _pages(self, path: str, accept: str = "application/json", timeout=None, **query) -> Iterator[dict]:
        token = None
        while True:
            page = self.get_json(path, accept, timeout, limit=PAGE, **{"continue": token}, **query)
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
        for page in self._pages(_path(kind, namespace), accept, 30, labelSelector=selector, fieldSelector=fields):
            items += page.get("items") or []
            version = version or page["metadata"]["resourceVersion"]  # the snapshot of page 1
        return items, version

    def watch(self, watches: Watches, kind: str, namespace: str, selector: str, resource_version: str,
              timeout: int, *, fields: str | None = None,
              accept: str = "application/json") -> Iterator[tuple[str, dict | None, str]]:
        """Watch the objects of a kind with these labels from `resource_version` (see
        Watches.stream), objects as JSON."""
        path = _path(kind, namespace)

        def request(*, watch, resource_version, allow_watch_bookmarks, timeout_seconds, _preload_content,
                    _request_timeout):
            return self._request("GET", path, accept=accept, timeout=_request_timeout, watch="true",
                                 resourceVersion=resource_version, allowWatchBookmarks="true",
                                 timeoutSeconds=str(timeout_seconds), labelSelector=selector,
                                 fieldSelector=fields).response
        return watches.stream(request, resource_version=resource_version, timeout=timeout)

    def succeeded_pods(self, namespace: str, selector: str) -> tuple[list[dict], str]:
        """The metadata (JSON) of the Succeeded pods with these labels, and the list's
        resourceVersion."""
        return self.listing("Pod", namespace, selector, fields=SUCCEEDED, accept=METADATA_LIST)

    def watch_succeeded_pods(self, watches: Watches, namespace: str, selector: str, resource_version: str,
                             timeout: int) -> Iterator[tuple[str, dict | None, str]]:
        """Pods turning Succeeded (ADDED: they enter the field selector) as metadata (JSON)."""
        return self.watch(watches, "Pod", namespace, selector, resource_version, timeout, fields=SUCCEEDED,
                          accept=METADATA_WATCH)

    def pod_log(self, namespace: str, pod: str, container: str, tail: int | None = None) -> str | None:
        """A container's log so far; None when the pod is gone."""
        return self._answer(f"log of pod {namespace}/{pod}", lambda: self._log(
            namespace, pod, container, tail).read().decode(errors="replace"))

    def follow_pod_log(self, namespace: str, pod: str, container: str,
                       tail: int | None = None) -> Iterator[bytes] | None:
        """A container's log as it is written, in chunks, until the container ends; None
        when the pod is gone. A connection lost meanwhile ends the chunks with urllib3's
        HTTPError."""
        return self._answer(f"log of pod {namespace}/{pod}", lambda: self._log(
            namespace, pod, container, tail, follow="true").response.stream(4096))

    def _log(self, namespace: str, pod: str, container: str, tail: int | None, **query):
        return self._request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log", accept="*/*",
                             container=container, tailLines=None if tail is None else str(tail), **query)

    def task_pods(self, namespace: str, cluster: str) -> Iterator[dict]:
        """A cluster's pods (JSON), paged: one page in memory at a time."""
        return self._each("Pod", namespace, f"{CLUSTER_LABEL}={cluster}")

    def workloads(self, namespace: str, cluster: str) -> tuple[list[JsonObject], list[JsonObject]]:
        """A cluster's Jobs and Deployments: a handful of objects whatever its size."""
        return self._workloads(namespace, f"{CLUSTER_LABEL}={cluster}")

    def tf_workloads(self, namespace: str | None) -> tuple[list[JsonObject], list[JsonObject]]:
        """Jobs and Deployments of every TF cluster in a namespace (None: all namespaces)."""
        return self._workloads(namespace, CLUSTER_LABEL)

    def _workloads(self, namespace: str | None, selector: str) -> tuple[list[JsonObject], list[JsonObject]]:
        return ([JsonObject(j) for j in self._all("Job", namespace, selector)],
                [JsonObject(d) for d in self._all("Deployment", namespace, selector)])

    def tf_succeeded_pods(self, namespace: str | None) -> Iterator[dict]:
        """The metadata (JSON) of every TF cluster's Succeeded chief and worker pods in a
        namespace (None: all namespaces), paged."""
        return self._each("Pod", namespace, f"{CLUSTER_LABEL},{ROLE_LABEL} in (chief,worker)", fields=SUCCEEDED,
                          accept=METADATA_LIST)

    def events_of(self, namespace: str, kind: str, name: str) -> list[JsonObject]:
        """The Events about one object (the reaper records its decisions on a Job)."""
        return [JsonObject(e) for e in self._all(
            "Event", namespace, fields=f"involvedObject.kind={kind},involvedObject.name={name}")]

    def ran_only_on_simulated_nodes(self, namespace: str, cluster: str) -> bool:
        """Did the cluster's pods run on simulated (kwok) nodes only, where no container
        runs? False when none was scheduled. Two lists of at most one pod each, by field
        selector (`up --wait` asks at the end: a pass over 1,024 pods took 0.3 s)."""
        path, sel = f"/api/v1/namespaces/{namespace}/pods", f"{CLUSTER_LABEL}={cluster}"

        def any_pod(*nodes: str) -> bool:
            fields = ",".join(f"spec.nodeName!={n}" for n in ("", *nodes))  # scheduled, not on these
            return bool(self._answer(f"pods in {namespace}", lambda: self.get_json(
                path, METADATA_LIST, labelSelector=sel, fieldSelector=fields, limit=1), absent=()).get("items"))
        if not any_pod():
            return False
        try:
            fake = [n["metadata"]["name"] for n in self._each("Node", None, accept=METADATA_LIST)
                    if (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake"]
        except Forbidden:  # a namespace's account (a workspace's notebook) sees no nodes: say real
            return False
        return not any_pod(*fake)

    def delete_jobs(self, namespace: str, cluster: str, names: list[str] | None = None,
                    timeout: float = 120) -> list[str]:
        """Delete a cluster's Jobs (all, or those named) and wait until they are gone, their
        pods first (foreground deletion): no old task runs beside a new one."""
        names = [j.metadata.name for j in self.objects(namespace, cluster).jobs] if names is None else names
        for name in names:
            self._delete("Job", namespace, name, propagation="Foreground")
        deadline = time.monotonic() + timeout
        while {j.metadata.name for j in self.objects(namespace, cluster).jobs} & set(names):
            if time.monotonic() > deadline:
                raise TimedOut(f"Jobs {', '.join(names)} of {namespace}/{cluster} still exist after {timeout}s")
            time.sleep(0.5)
        return names

    def release_tracking_finalizers(self, namespace: str, selector: str | None = None) -> list[str]:
        """Take the Job controller's `batch.kubernetes.io/job-tracking` finalizer off the pods
        (with these labels) whose Job is gone: once the Job is deleted nothing is left to
        count, and Kubernetes up to 1.36.3 tries that only once (a failed request, say an API
        server busy enough to time out, leaves the pod, and so its namespace, stuck deleting:
        kubernetes/kubernetes#141329). The pods released, by name."""
        jobs = {(j["metadata"]["name"], j["metadata"]["uid"]) for j in self._all("Job", namespace, accept=METADATA_LIST)}
        released = []
        for pod in self._all("Pod", namespace, selector, accept=METADATA_LIST):
            meta = pod["metadata"]
            finalizers = meta.get("finalizers") or []
            owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
            if JOB_TRACKING not in finalizers or (owner and (owner["name"], owner["uid"]) in jobs
                                                  and owner.get("kind") == "Job"):
                continue
            i = finalizers.index(JOB_TRACKING)
            patch = [{"op": "test", "path": f"/metadata/finalizers/{i}", "value": JOB_TRACKING},
                     {"op": "remove", "path": f"/metadata/finalizers/{i}"}]
            try:
                if self._one("PATCH", "Pod", namespace, meta["name"], patch, content_type=JSON_PATCH,
                             query={"fieldManager": "tfhelm"}):
                    released.append(meta["name"])
            except TfhelmError as err:
                # Its finalizers changed meanwhile (the test failed): fine if it is released.
                now = self._one("GET", "Pod", namespace, meta["name"]) or {"metadata": {}}
                if JOB_TRACKING in (now["metadata"].get("finalizers") or []):
                    raise err
        return released

    def delete_pvcs(self, namespace: str, cluster: str) -> list[str]:
        """Delete the cluster's PVCs; those deleted."""
        return [p.metadata.name for p in self.objects(namespace, cluster).pvcs
                if self.delete_pvc(namespace, p.metadata.name)]

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
        path = _path(kind, namespace, None if method == "POST" else name)
        return self._answer(_what(kind, namespace, name), lambda: self.request_json(
            method, path, body, content_type=content_type, timeout=timeout, **(query or {})), absent)

    def _each(self, kind: str, namespace: str | None, selector: str | None = None, *, fields: str | None = None,
              accept: str = "application/json", timeout: float | None = None) -> Iterator[dict]:
        """The objects of a kind (None: in every namespace) with these labels and fields,
        page by page: one page is in memory at a time."""
        what = _RESOURCES[kind][1] + (f" in {namespace}" if namespace else "")
        pages = self._pages(_path(kind, namespace), accept, timeout, labelSelector=selector, fieldSelector=fields)
        while (page := self._answer(what, lambda: next(pages, None), absent=())) is not None:
            yield from page.get("items") or []

    def _all(self, kind: str, namespace: str | None, selector: str | None = None, **options) -> list[dict]:
        """The objects of a kind with these labels (see _each), all at once."""
        return list(self._each(kind, namespace, selector, **options))

    def _create(self, kind: str, namespace: str | None, obj: dict, timeout: float | None = None) -> dict | None:
        """The object created; None when one of that name exists."""
        return self._one("POST", kind, namespace, obj["metadata"]["name"], obj, absent=(409,), timeout=timeout)

    def _delete(self, kind: str, namespace: str | None, name: str, propagation: str | None = None,
                timeout: float | None = None) -> bool:
        """Delete one object (its dependents: `propagation`, else the API's default); False
        when there was none."""
        options = None if propagation is None else {
            "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        return self._one("DELETE", kind, namespace, name, options, timeout=timeout) is not None

    def metadata(self, kind: str, namespace: str | None, selector: str | None = None, *,
                 optional: bool = False) -> list[dict]:
        """The metadata (JSON) of the objects of a kind with these labels. `optional`: a kind
        this server does not serve (a CRD not installed) or this client may not list is none."""
        try:
            return [o["metadata"] for o in self._all(kind, namespace, selector, accept=METADATA_LIST)]
        except TfhelmError as err:
            status = getattr(err.__cause__, "status", None)
            if optional and status in (403, 404):
                return []
            raise

    def delete(self, kind: str, namespace: str | None, name: str, propagation: str = "Background") -> bool:
        """Delete one object of any kind the facade serves (its dependents in the background);
        False when there was none."""
        return self._delete(kind, namespace, name, propagation)

    def read(self, kind: str, namespace: str | None, name: str) -> dict | None:
        """One object of any kind the facade serves; None when there is none."""
        return self._one("GET", kind, namespace, name)

    def serves(self, obj: dict) -> bool:
        """Does the API server serve this object's kind? Discovery (once per client) says no at
        once; a yes is asked of the server again, as the client library's discovery cache, on
        disk per server address, outlives what it describes (Kueue uninstalled, a new local
        cluster on the same port)."""
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        what, version = f"discovery of {obj['apiVersion']}", obj["apiVersion"]
        try:
            self._answer(what, lambda: self._resource(obj), absent=())
        except TfhelmError as err:
            if isinstance(err.__cause__, ResourceNotFoundError):
                return False
            raise
        path = f"/apis/{version}" if "/" in version else f"/api/{version}"
        if self._answer(what, lambda: self._request("GET", path).read()) is None:
            self._dynamic.resources.invalidate_cache()
            return False
        return True

    def apply(self, obj: dict, namespace: str | None = None) -> None:
        """Server-side apply of one object as tfhelm, taking its fields over."""
        self._answer(_what(obj["kind"], namespace, obj["metadata"]["name"]),
                     lambda: self.server_side_apply(obj, namespace), absent=())

    def read_namespace(self, name: str) -> dict | None:
        return self._one("GET", "Namespace", None, name)

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> bool:
        """False when one of that name exists."""
        meta = {"name": name, **({"labels": labels} if labels else {})}
        obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
        return self._create("Namespace", None, obj) is not None

    def label_namespace(self, name: str, labels: dict[str, str]) -> bool:
        """Set these labels, keep the others; False when there is no such namespace."""
        return self._one("PATCH", "Namespace", None, name, {"metadata": {"labels": labels}},
                         content_type=MERGE_PATCH) is not None

    def namespaces(self, selector: str) -> list[dict]:
        return self._all("Namespace", None, selector)

    def read_secret(self, namespace: str, name: str) -> dict | None:
        return self._one("GET", "Secret", namespace, name)

    def create_secret(self, namespace: str, obj: dict) -> bool:
        """False when one of that name exists."""
        return self._create("Secret", namespace, obj) is not None

    def secret_names(self, namespace: str, fields: str) -> list[str]:
        """The Secrets with these fields (e.g. `type=kubernetes.io/service-account-token`)."""
        return [s["metadata"]["name"] for s in self._all("Secret", namespace, fields=fields, accept=METADATA_LIST)]

    def delete_secret(self, namespace: str, name: str) -> bool:
        """False when there was none."""
        return self._delete("Secret", namespace, name)

    def deployments(self, namespace: str, selector: str, timeout: float | None = None) -> list[dict]:
        return self._all("Deployment", namespace, selector, timeout=timeout)

    def delete_deployment(self, namespace: str, name: str, timeout: float | None = None) -> bool:
        """Delete it, its pods in the background; False when there was none."""
        return self._delete("Deployment", namespace, name, "Background", timeout)

    def services(self, namespace: str, selector: str, timeout: float | None = None) -> list[dict]:
        return self._all("Service", namespace, selector, timeout=timeout)

    def delete_service(self, namespace: str, name: str, timeout: float | None = None) -> bool:
        """False when there was none."""
        return self._delete("Service", namespace, name, "Background", timeout)

    def suspend_job(self, namespace: str, name: str, timeout: float | None = None) -> bool:
        """Suspend a Job (its running pods are stopped); False when there is none."""
        return self._one("PATCH", "Job", namespace, name, {"spec": {"suspend": True}}, content_type=MERGE_PATCH,
                         timeout=timeout) is not None

    def remove_scheduling_gate(self, namespace: str, pod: str, gate: str, timeout: float | None = None) -> bool:
        """Let a pod be scheduled, as far as this gate goes (removing an absent gate changes
        nothing); False when the pod is gone."""
        body = {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}]}}
        return self._one("PATCH", "Pod", namespace, pod, body, content_type=STRATEGIC_PATCH,
                         timeout=timeout) is not None

    def evict_pod(self, namespace: str, pod: str, timeout: float | None = None) -> bool:
        """The Eviction API (the pod gets the DisruptionTarget condition, and a budget is
        respected); False when the pod is gone."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
        return self._answer(_what("Pod", namespace, pod), lambda: self.request_json(
            "POST", f"{_path('Pod', namespace, pod)}/eviction", body, timeout=timeout)) is not None

    def job_workloads(self, namespace: str, job_uid: str | None = None, timeout: float | None = None) -> list[dict]:
        """The Kueue Workloads of a Job (or of every Job in the namespace); none where Kueue
        is not installed."""
        return self._kueue(lambda: self._all("Workload", namespace, f"{KUEUE_JOB_UID}={job_uid}" if job_uid
                                             else KUEUE_JOB_UID, timeout=timeout), [])

    def delete_job(self, namespace: str, name: str, timeout: float | None = None) -> bool:
        """Delete a Job, its pods in the background; False when there was none."""
        return self._delete("Job", namespace, name, "Background", timeout)

    def read_local_queue(self, namespace: str, name: str) -> dict | None:
        return self._kueue(lambda: self._one("GET", "LocalQueue", namespace, name))

    def read_cluster_queue(self, name: str) -> dict | None:
        return self._kueue(lambda: self._one("GET", "ClusterQueue", None, name))

    def read_resource_flavor(self, name: str) -> dict | None:
        return self._kueue(lambda: self._one("GET", "ResourceFlavor", None, name))

    def local_queues(self, namespace: str, selector: str) -> list[dict]:
        """The LocalQueues with these labels; none where Kueue is not installed."""
        return self._kueue(lambda: self._all("LocalQueue", namespace, selector), [])

    def read_workload_priority_class(self, name: str) -> dict | None:
        return self._kueue(lambda: self._one("GET", "WorkloadPriorityClass", None, name))

    def serves_kueue(self) -> bool:
        """Is Kueue installed (its API served)?"""
        return self.serves({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue"})

    @staticmethod
    def _kueue(read: Callable[[], T], absent: T = None) -> T:
        """A read of Kueue's objects; `absent` where Kueue is not installed (its API: 404)."""
        try:
            return read()
        except TfhelmError as err:
            if _not_served(err):
                return absent
            raise

    def create_event(self, namespace: str, obj: dict, timeout: float | None = None) -> bool:
        """Record an Event; False when one of that name exists."""
        return self._create("Event", namespace, obj, timeout) is not None

    def read_deployment(self, namespace: str, name: str) -> dict | None:
        return self._one("GET", "Deployment", namespace, name)

    def pods(self, namespace: str, selector: str | None = None) -> list[dict]:
        return self._all("Pod", namespace, selector)

    def read_service(self, namespace: str, name: str) -> dict | None:
        return self._one("GET", "Service", namespace, name)

    def read_ingress(self, namespace: str, name: str) -> dict | None:
        return self._one("GET", "Ingress", namespace, name)

    def read_node(self, name: str) -> dict | None:
        return self._one("GET", "Node", None, name)

    def create_lease(self, namespace: str, obj: dict) -> dict | None:
        """The Lease created; None when one of that name exists."""
        return self._create("Lease", namespace, obj)

    def read_lease(self, namespace: str, name: str) -> dict | None:
        return self._one("GET", "Lease", namespace, name)

    def replace_lease(self, namespace: str, obj: dict) -> dict | None:
        """Replace a Lease as of its metadata.resourceVersion: the Lease stored; None when it
        is gone or someone changed it since (404, 409)."""
        return self._one("PUT", "Lease", namespace, obj["metadata"]["name"], obj, absent=(404, 409))

    def delete_lease(self, namespace: str, name: str, uid: str) -> bool:
        """Delete this very Lease (by uid); False when it is gone or another took its place."""
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        return self._one("DELETE", "Lease", namespace, name, options, absent=(404, 409)) is not None


T = TypeVar("T")
JSON_PATCH = "application/json-patch+json"
JOB_TRACKING = "batch.kubernetes.io/job-tracking"  # the Job controller's finalizer on its pods
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
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


def _path(kind: str, namespace: str | None, name: str | None = None) -> str:
    prefix, resource = _RESOURCES[kind]
    scope = ("namespaces", namespace) if namespace else ()
    return "/".join([prefix, *scope, resource, *((name,) if name else ())])


def _not_served(err: Exception) -> bool:
    """A 404 for a whole kind: its API is not installed (a 404 for one object is None)."""
    cause = err.__cause__
    return isinstance(cause, ApiException) and cause.status == 404


def _what(kind: str, namespace: str | None, name: str) -> str:
    """How an error names the object: `Secret team-a/x`, `Namespace team-a`."""
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
