"""A user's workspace on the cluster: the side-effect layer under `tfhelm user`.

`add` makes the namespace (Pod Security "restricted"), the notebook's token Secret (random,
made here, never by the chart and never in Helm values) and installs or upgrades the
user-env release. The token leaves the cluster only through `urls()`.
"""

from __future__ import annotations

import base64
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException

from tfhelm import users
from tfhelm.errors import SpecError, TfhelmError, api_error
from tfhelm.kube import CLUSTER_LABEL

if TYPE_CHECKING:
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube

Notify = Callable[[str], None]
T = TypeVar("T")
_OURS = f"{users.USER_LABEL},app.kubernetes.io/managed-by=tfhelm"


def _api(what: str, call: Callable[[], T]) -> T | None:
    """One API call; None when the object does not exist, else a TfhelmError naming it."""
    try:
        return call()
    except ApiException as err:
        if err.status == 404:
            return None
        raise api_error(err, what) from err


def render(opts: users.UserOptions, helm: Helm) -> list[dict]:
    """The release's manifests, rendered by the real chart (schema and checks included)."""
    values = users.compute_user_values(opts)
    return helm.template(users.RELEASE, values, users.user_namespace(opts.name), chart=users.CHART)


def add(opts: users.UserOptions, helm: Helm, kube: Kube, notify: Notify = lambda _: None) -> None:
    """Create or update a user's workspace. A failed first install leaves nothing behind;
    an existing token is kept, so adding a user again only upgrades the release."""
    values = users.compute_user_values(opts)
    ns = users.user_namespace(opts.name)
    render(opts, helm)
    kube.ping()
    apply_service_policy(kube)
    created_ns = _ensure_namespace(kube, opts.name)
    if created_ns:
        notify(f"created namespace {ns} (Pod Security: restricted)")
    try:
        wait_service_policy(kube, ns)
    except Exception:
        if created_ns:
            _api(f"namespace {ns}", lambda: kube.core.delete_namespace(ns))
        raise
    notify(f"Services in {ns}: ClusterIP or headless only, no externalIPs "
           f"(ValidatingAdmissionPolicy {POLICY})")
    created_token = _ensure_token(kube, ns, opts.name)
    if created_token:
        notify(f"created the notebook's login token in Secret {ns}/{users.token_secret()}")
    try:
        notify(f"installing release {ns}/{users.RELEASE}")
        # No wait here: a slow first pull of one image must not roll back the workspace
        # (wait_ready() reports what is still starting instead).
        helm.install_or_upgrade(users.RELEASE, values, ns, chart=users.CHART, wait=False)
    except Exception:
        if created_ns:
            notify(f"deleting namespace {ns} again")
            _api(f"namespace {ns}", lambda: kube.core.delete_namespace(ns))
        elif created_token:
            _api(f"secret {ns}/{users.token_secret()}",
                 lambda: kube.core.delete_namespaced_secret(users.token_secret(), ns))
        raise


POLICY = "tfhelm-user-services"


def apply_service_policy(kube: Kube) -> None:
    """The cluster-wide policy that fences every user namespace's Services (server-side
    apply: the same objects again change nothing)."""
    for obj in users.service_policy():
        try:
            kube.server_side_apply(obj)
        except ApiException as err:
            raise api_error(err, f"{obj['kind']} {obj['metadata']['name']}") from err
        except TfhelmError as err:  # not served: ValidatingAdmissionPolicy is GA since 1.30
            raise TfhelmError(f"{err}: Kubernetes 1.30 or later is needed to keep users from "
                              "creating Services that capture other users' traffic "
                              "(ValidatingAdmissionPolicy)") from err


def wait_service_policy(kube: Kube, ns: str, timeout: float = 30) -> None:
    """Until the API server enforces the policy in `ns` (it starts a moment after it is
    created): a server-side dry run of a Service nobody may create there must be refused."""
    probe = client.V1Service(metadata=client.V1ObjectMeta(name="tfhelm-policy-probe"), spec=client.V1ServiceSpec(
        type="LoadBalancer", load_balancer_ip="192.0.2.1", ports=[client.V1ServicePort(port=80)]))
    deadline = time.monotonic() + timeout
    while True:
        try:
            kube.core.create_namespaced_service(ns, probe, dry_run="All")
        except ApiException as err:
            if err.status == 403 and POLICY in (err.body or ""):
                return
            raise api_error(err, f"service {ns}/tfhelm-policy-probe (dry run)") from err
        if time.monotonic() > deadline:
            raise TfhelmError(f"ValidatingAdmissionPolicy {POLICY} is not enforced in namespace {ns} "
                              f"after {timeout:.0f}s; check `kubectl get validatingadmissionpolicybinding {POLICY}`")
        time.sleep(0.5)


def require_workspace(user: str, kube: Kube) -> None:
    """`tfhelm up --user`: the user's namespace must be a workspace `tfhelm user add` made
    (Pod Security, quota, isolation); else a usage error, before anything is created."""
    ns = users.user_namespace(user)
    existing = _api(f"namespace {ns}", lambda: kube.core.read_namespace(ns))
    if existing is None:
        raise SpecError("--user", f"user {user} has no workspace (no namespace {ns})",
                        f"a cluster admin creates it with `tfhelm user add {user}`")
    if _user_of(existing) != user:
        raise SpecError("--user", f"namespace {ns} is not the workspace of user {user} "
                        f"(no label {users.USER_LABEL}={user})", "see `tfhelm user list`")
    if _terminating(existing):
        raise SpecError("--user", f"the workspace of user {user} is being deleted")


def not_ready(user: str, kube: Kube) -> dict[str, str]:
    """The workspace's Deployments that are not available yet, each with the reason its
    pod gives (e.g. `ContainerCreating`, `ImagePullBackOff`)."""
    ns = users.user_namespace(user)
    selector = f"app.kubernetes.io/instance={users.RELEASE}"
    waiting: dict[str, str] = {}
    for d in kube.apps.list_namespaced_deployment(ns, label_selector=selector).items:
        if (d.status.available_replicas or 0) >= (d.spec.replicas or 0):
            continue
        component = (d.metadata.labels or {}).get("app.kubernetes.io/component", d.metadata.name)
        reason = "starting"
        match = ",".join(f"{k}={v}" for k, v in (d.spec.selector.match_labels or {}).items())
        for pod in kube.core.list_namespaced_pod(ns, label_selector=match).items:
            for cs in pod.status.container_statuses or []:
                if cs.state and cs.state.waiting:
                    reason = cs.state.waiting.reason or reason
            if pod.status.phase == "Pending" and not pod.spec.node_name:
                reason = "not scheduled yet"
        waiting[component] = reason
    return waiting


def wait_ready(user: str, kube: Kube, timeout: float, progress: Notify = lambda _: None) -> dict[str, str]:
    """Wait until every component is available or timeout passed; returns what is not."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = not_ready(user, kube)
        if not waiting or time.monotonic() > deadline:
            return waiting
        progress(", ".join(f"{c} ({r})" for c, r in sorted(waiting.items())))
        time.sleep(1)


def _user_of(ns: client.V1Namespace) -> str | None:
    return (ns.metadata.labels or {}).get(users.USER_LABEL)


def _terminating(ns: client.V1Namespace) -> bool:
    return bool(ns.status and ns.status.phase == "Terminating")


def _ensure_namespace(kube: Kube, user: str) -> bool:
    """Create the namespace, or put its labels back; True when this call created it."""
    ns = users.user_namespace(user)
    labels = users.namespace_labels(user)
    existing = _api(f"namespace {ns}", lambda: kube.core.read_namespace(ns))
    if existing is None:
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels=labels))
        _api(f"namespace {ns}", lambda: kube.core.create_namespace(body))
        return True
    if _user_of(existing) != user:
        raise TfhelmError(f"namespace {ns} exists but is not the workspace of user {user} "
                          f"(no label {users.USER_LABEL}={user}); remove it or pick another name")
    if _terminating(existing):
        raise TfhelmError(f"namespace {ns} is still being deleted; try again once it is gone")
    _api(f"namespace {ns}", lambda: kube.core.patch_namespace(ns, {"metadata": {"labels": labels}}))
    return False


def _ensure_token(kube: Kube, ns: str, user: str) -> bool:
    """Create the login token Secret unless it exists; True when this call created it."""
    name = users.token_secret()
    if _api(f"secret {ns}/{name}", lambda: kube.core.read_namespaced_secret(name, ns)) is not None:
        return False
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(name=name, labels={users.USER_LABEL: user, **users.MANAGED_BY}),
        type="Opaque", string_data={users.TOKEN_KEY: secrets.token_urlsafe(32)})
    _api(f"secret {ns}/{name}", lambda: kube.core.create_namespaced_secret(ns, body))
    return True


def remove(user: str, helm: Helm, kube: Kube, purge: bool = False,
                 notify: Notify = lambda _: None) -> bool:
    """Uninstall the workspace and revoke its token (the notebook's account goes); the
    namespace, its volumes and its fence (NetworkPolicies, quota, LimitRange: the chart
    keeps them) stay unless `purge` (which deletes the namespace with everything in it, TF
    clusters too), so whatever still runs there stays isolated. False when the user has no
    workspace."""
    ns = users.user_namespace(user)
    existing = _api(f"namespace {ns}", lambda: kube.core.read_namespace(ns))
    if existing is None or _user_of(existing) != user or _terminating(existing):
        return False
    if helm.uninstall(users.RELEASE, ns):
        notify(f"uninstalled release {ns}/{users.RELEASE}")
    name = users.token_secret()
    if _api(f"secret {ns}/{name}", lambda: kube.core.delete_namespaced_secret(name, ns)) is not None:
        notify(f"deleted the login token Secret {ns}/{name}")
    if purge:
        _api(f"namespace {ns}", lambda: kube.core.delete_namespace(ns))
        notify(f"deleting namespace {ns}: the code, logs and data volumes and all in it")
    return True


def still_running(user: str, kube: Kube) -> list[str]:
    """What still runs in a user's namespace: TF clusters by name, other pods counted."""
    ns = users.user_namespace(user)
    pods = _api(f"pods of {ns}", lambda: kube.core.list_namespaced_pod(ns)).items
    live = [p for p in pods if p.status.phase in ("Pending", "Running") and not p.metadata.deletion_timestamp]
    clusters = sorted({(p.metadata.labels or {}).get(CLUSTER_LABEL) for p in live} - {None})
    others = sum(1 for p in live if CLUSTER_LABEL not in (p.metadata.labels or {}))
    return [f"TF cluster {c}" for c in clusters] + ([f"{others} other pod(s)"] if others else [])


@dataclass
class Urls:
    notebook: str | None  # with `?token=`
    tensorboard: str | None
    files: str | None  # in-cluster


def urls(user: str, kube: Kube) -> Urls:
    """Where the user's notebook (with its login token), TensorBoard and files answer."""
    ns = users.user_namespace(user)
    name = users.token_secret()
    secret = _api(f"secret {ns}/{name}", lambda: kube.core.read_namespaced_secret(name, ns))
    if secret is None or users.TOKEN_KEY not in (secret.data or {}):
        raise SpecError("NAME", f"no login token in secret {ns}/{name}", f"add the user with `tfhelm user add {user}`")
    token = base64.b64decode(secret.data[users.TOKEN_KEY]).decode()
    notebook, tensorboard = _url(kube, ns, "notebook"), _url(kube, ns, "tensorboard")
    return Urls(notebook=notebook and f"{notebook}?token={token}",
                tensorboard=tensorboard and (f"{tensorboard}?token={token}"
                                             if _behind_login(kube, ns) else tensorboard),
                files=_url(kube, ns, "files"))


def _behind_login(kube: Kube, ns: str) -> bool:
    """Does TensorBoard run behind its login proxy (`tensorboard.auth.enabled`)?"""
    name = users.component_name("tensorboard")
    d = _api(f"deployment {ns}/{name}", lambda: kube.apps.read_namespaced_deployment(name, ns))
    return bool(d) and any(c.name == "auth" for c in d.spec.template.spec.containers)


def _url(kube: Kube, ns: str, component: str) -> str | None:
    """An Ingress host, else a load balancer, else the node port on the pod's node
    (externalTrafficPolicy: Local), else the in-cluster Service address."""
    name = users.component_name(component)
    ingress = _api(f"ingress {ns}/{name}",
                   lambda: client.NetworkingV1Api(kube.api).read_namespaced_ingress(name, ns))
    host = ingress and ingress.spec.rules and ingress.spec.rules[0].host
    if host:
        tls = any(host in (t.hosts or []) for t in ingress.spec.tls or [])
        return f"{'https' if tls else 'http'}://{host}/"
    svc = _api(f"service {ns}/{name}", lambda: kube.core.read_namespaced_service(name, ns))
    if svc is None:
        return None
    port = svc.spec.ports[0]
    balancers = (svc.status.load_balancer and svc.status.load_balancer.ingress) or []
    if svc.spec.type == "LoadBalancer" and balancers:
        return f"http://{balancers[0].ip or balancers[0].hostname}:{port.port}/"
    if svc.spec.type in ("NodePort", "LoadBalancer"):
        return f"http://{_pod_node_address(kube, ns, name, svc.spec.selector)}:{port.node_port}/"
    return f"http://{name}.{ns}.svc:{port.port}/"


def _pod_node_address(kube: Kube, ns: str, name: str, selector: dict[str, str]) -> str:
    sel = ",".join(f"{k}={v}" for k, v in selector.items())
    pods = _api(f"pods of {ns}/{name}", lambda: kube.core.list_namespaced_pod(ns, label_selector=sel))
    nodes = [p.spec.node_name for p in pods.items if p.spec.node_name and not p.metadata.deletion_timestamp]
    if not nodes:
        raise TfhelmError(f"{ns}/{name}: no pod is scheduled yet, and its node port answers only on "
                          f"the pod's node; see `kubectl -n {ns} get pods`")
    node = _api(f"node {nodes[0]}", lambda: kube.core.read_node(nodes[0]))
    addresses = {a.type: a.address for a in (node and node.status.addresses) or []}
    for kind in ("ExternalIP", "InternalIP", "Hostname"):
        if addresses.get(kind):
            return addresses[kind]
    return nodes[0]


@dataclass
class UserRow:
    user: str
    namespace: str
    state: str


def list_users(kube: Kube) -> list[UserRow]:
    """Every user namespace tfhelm made, and the state of its workspace."""
    rows = []
    for ns in _api("namespaces", lambda: kube.core.list_namespace(label_selector=_OURS)).items:
        name = ns.metadata.name
        if _terminating(ns):
            state = "being deleted"
        else:
            deps = _api(f"deployments of {name}", lambda: kube.apps.list_namespaced_deployment(
                name, label_selector=f"app.kubernetes.io/instance={users.RELEASE}")).items
            ready = sum((d.status.ready_replicas or 0) >= (d.spec.replicas or 0) for d in deps)
            state = ("removed (volumes kept)" if not deps else
                     "ready" if ready == len(deps) else f"starting ({ready}/{len(deps)} ready)")
        rows.append(UserRow(_user_of(ns), name, state))
    return sorted(rows, key=lambda r: r.user)
