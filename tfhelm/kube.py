"""The Kubernetes door: every request tfhelm makes of the API server (but the pods', which
have tfhelm/pod/apiserver.py), objects as the API's JSON (plain dicts). Kube is the generic
requests by kind (tfhelm/kuberest.py) and the typed ones the CLI needs; which objects are a
TF cluster's is the cluster domain's (tfhelm/cluster/objects.py)."""

from __future__ import annotations

import re
from typing import Callable, Iterator, TypeVar

from kubernetes.client.rest import ApiException

from tfhelm.apierrors import access_denied, api_error, api_message
from tfhelm.contract import KUEUE_JOB_UID
from tfhelm.errors import AdmissionRefused, TfhelmError
from tfhelm.kuberest import KubeRest, path_of, subject
from tfhelm.pod.apiserver import (  # both doors ask alike
    JSON_PATCH, MERGE_PATCH, METADATA_LIST, METADATA_WATCH, STRATEGIC_PATCH, SUCCEEDED)
from tfhelm.watches import Watches

T = TypeVar("T")
JOB_TRACKING = "batch.kubernetes.io/job-tracking"  # the Job controller's finalizer on its pods


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


class Kube(KubeRest):
    """A missing object is None (False where the method answers a yes or no), a refusal a
    typed error naming it (see KubeRest)."""

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
        return self.delete("Namespace", None, namespace, propagation=None)

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

    def delete_pvc(self, namespace: str, name: str) -> bool:
        """False when there was none."""
        return self.delete("PersistentVolumeClaim", namespace, name, propagation=None)

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
        return {c["metadata"]["name"] for c in self.items("ConfigMap", namespace, selector, accept=METADATA_LIST)}

    def delete_configmap(self, namespace: str, name: str) -> bool:
        """False when there was none."""
        return self.delete("ConfigMap", namespace, name, propagation=None)

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

    def release_tracking_finalizers(self, namespace: str, selector: str | None = None) -> list[str]:
        """Take the Job controller's `batch.kubernetes.io/job-tracking` finalizer off the pods
        (with these labels) whose Job is gone: once the Job is deleted nothing is left to
        count, and Kubernetes up to 1.36.3 tries that only once (a failed request, say an API
        server busy enough to time out, leaves the pod, and so its namespace, stuck deleting:
        kubernetes/kubernetes#141329). The pods released, by name."""
        jobs = {(j["metadata"]["name"], j["metadata"]["uid"])
                for j in self.items("Job", namespace, accept=METADATA_LIST)}
        released = []
        for pod in self.items("Pod", namespace, selector, accept=METADATA_LIST):
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
        self._answer(subject(obj["kind"], namespace, obj["metadata"]["name"]),
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
        return self.items("Namespace", None, selector)

    def read_secret(self, namespace: str, name: str) -> dict | None:
        return self._one("GET", "Secret", namespace, name)

    def create_secret(self, namespace: str, obj: dict) -> bool:
        """False when one of that name exists."""
        return self._create("Secret", namespace, obj) is not None

    def secret_names(self, namespace: str, fields: str) -> list[str]:
        """The Secrets with these fields (e.g. `type=kubernetes.io/service-account-token`)."""
        return [s["metadata"]["name"] for s in self.items("Secret", namespace, fields=fields, accept=METADATA_LIST)]

    def delete_secret(self, namespace: str, name: str) -> bool:
        """False when there was none."""
        return self.delete("Secret", namespace, name, propagation=None)

    def deployments(self, namespace: str, selector: str, timeout: float | None = None) -> list[dict]:
        return self.items("Deployment", namespace, selector, timeout=timeout)

    def delete_deployment(self, namespace: str, name: str, timeout: float | None = None) -> bool:
        """Delete it, its pods in the background; False when there was none."""
        return self.delete("Deployment", namespace, name, timeout=timeout)

    def services(self, namespace: str, selector: str, timeout: float | None = None) -> list[dict]:
        return self.items("Service", namespace, selector, timeout=timeout)

    def delete_service(self, namespace: str, name: str, timeout: float | None = None) -> bool:
        """False when there was none."""
        return self.delete("Service", namespace, name, timeout=timeout)

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
        return self._answer(subject("Pod", namespace, pod), lambda: self.request_json(
            "POST", f"{path_of('Pod', namespace, pod)}/eviction", body, timeout=timeout)) is not None

    def job_workloads(self, namespace: str, job_uid: str | None = None, timeout: float | None = None) -> list[dict]:
        """The Kueue Workloads of a Job (or of every Job in the namespace); none where Kueue
        is not installed."""
        return self._kueue(lambda: self.items("Workload", namespace, f"{KUEUE_JOB_UID}={job_uid}" if job_uid
                                             else KUEUE_JOB_UID, timeout=timeout), [])

    def delete_job(self, namespace: str, name: str, timeout: float | None = None) -> bool:
        """Delete a Job, its pods in the background; False when there was none."""
        return self.delete("Job", namespace, name, timeout=timeout)

    def read_local_queue(self, namespace: str, name: str) -> dict | None:
        return self._kueue(lambda: self._one("GET", "LocalQueue", namespace, name))

    def read_cluster_queue(self, name: str) -> dict | None:
        return self._kueue(lambda: self._one("GET", "ClusterQueue", None, name))

    def read_resource_flavor(self, name: str) -> dict | None:
        return self._kueue(lambda: self._one("GET", "ResourceFlavor", None, name))

    def local_queues(self, namespace: str, selector: str) -> list[dict]:
        """The LocalQueues with these labels; none where Kueue is not installed."""
        return self._kueue(lambda: self.items("LocalQueue", namespace, selector), [])

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
        return self.items("Pod", namespace, selector)

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


def _not_served(err: Exception) -> bool:
    """A 404 for a whole kind: its API is not installed (a 404 for one object is None)."""
    cause = err.__cause__
    return isinstance(cause, ApiException) and cause.status == 404
