"""A user's workspace on the cluster: the side-effect layer under `tfhelm user`.

`add` makes the namespace (Pod Security "restricted"), the notebook's token Secret (random,
made here, never by the chart and never in Helm values) and installs or upgrades the
user-env release. The token leaves the cluster only through `urls()`.
"""

from __future__ import annotations

import base64
import dataclasses
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from tfhelm import releases
from tfhelm.contract import CLUSTER_LABEL
from tfhelm.errors import AdmissionRefused, Forbidden, SpecError, TfhelmError
from tfhelm.workspace import userspec

if TYPE_CHECKING:
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube

Notify = Callable[[str], None]
_OURS = f"{userspec.USER_LABEL},app.kubernetes.io/managed-by=tfhelm"


def render(opts: userspec.UserOptions, helm: Helm, values: dict | None = None) -> list[dict]:
    """The release's manifests, rendered by the real chart (schema and checks included);
    `values`: the options' values, when the caller computed them already."""
    values = userspec.compute_user_values(opts) if values is None else values
    return helm.template(userspec.RELEASE, values, userspec.user_namespace(opts.name), chart=userspec.CHART)


def add(opts: userspec.UserOptions, helm: Helm, kube: Kube, notify: Notify = lambda _: None) -> None:
    """Create or update a user's workspace. A failed first install leaves nothing behind;
    an existing token is kept, so adding a user again only upgrades the release. What the
    options say is what the workspace gets: a fence object the values no longer hold (the
    `--metrics-from` policy) goes, rather than outliving the release (Helm keeps it)."""
    values = userspec.compute_user_values(opts)
    ns = userspec.user_namespace(opts.name)
    rendered = render(opts, helm, values)  # bad values are refused before anything touches the cluster
    kube.ping()
    values = _with_queue(opts, values, kube)
    for name in dict.fromkeys(opts.priority_classes):
        if kube.read("PriorityClass", None, name) is None:
            raise SpecError("--priority-class", f"there is no PriorityClass '{name}'", "see `kubectl get priorityclass`")
    queue = userspec.queue_settings(values)
    apply_policies(kube, userspec.priority_policy() if queue["enabled"] else [])
    if queue["enabled"]:
        notify(f"Kueue: ClusterQueue {ns} (cohort {queue['cohort'] or 'none'}, nominal "
               f"{', '.join(f'{k} {v}' for k, v in sorted(queue['nominalQuota'].items()))}) and LocalQueue "
               f"{ns}/{queue['name']}; priorities it may use: {', '.join(queue['priorityClasses']) or 'the default only'} "
               f"(ValidatingAdmissionPolicy {PRIORITY_POLICY})")
    created_ns = _ensure_namespace(kube, opts.name)
    if created_ns:
        notify(f"created namespace {ns} (Pod Security: restricted)")
    try:
        wait_service_policy(kube, ns)
        # Its record may predate the policy that keeps the user from rewriting it: Helm's
        # upgrade deletes what the record names, so check it names only the workspace's.
        releases.check_records(kube, ns, userspec.RELEASE, frozenset(WORKSPACE_KINDS),
                               frozenset((o["kind"], o["metadata"]["name"]) for o in rendered))
    except Exception:
        if created_ns:
            kube.delete_namespace(ns)
        raise
    notify(f"fenced {ns}: Services ClusterIP or headless only, the release's record, NetworkPolicies and "
           f"the user node the admin's (ValidatingAdmissionPolicies {', '.join(userspec.policy_names())})")
    created_token = _ensure_token(kube, ns, opts.name)
    if created_token:
        notify(f"created the notebook's login token in Secret {ns}/{userspec.token_secret()}")
    try:
        notify(f"installing release {ns}/{userspec.RELEASE}")
        # No wait here: a slow first pull of one image must not roll back the workspace
        # (wait_ready() reports what is still starting instead).
        helm.install_or_upgrade(userspec.RELEASE, values, ns, chart=userspec.CHART, wait=False)
    except Exception:
        if created_ns:
            notify(f"deleting namespace {ns} again")
            kube.delete_namespace(ns)
        elif created_token:
            kube.delete_secret(ns, userspec.token_secret())
        raise
    for what in _drop_stale_fence(kube, ns, rendered):
        notify(f"deleted {what} from {ns}: the workspace's values no longer hold it")


def _drop_stale_fence(kube: Kube, ns: str, rendered: list[dict]) -> list[str]:
    """The fence objects (kept on uninstall, so kept by Helm when a value drops them) that
    the workspace's render no longer holds: deleted, as "Kind name"."""
    wanted = {(o["kind"], o["metadata"]["name"]) for o in rendered}
    selector = f"{releases.INSTANCE}={userspec.RELEASE},app.kubernetes.io/component=policy"
    return [f"{kind} {m['name']}" for kind in sorted(FENCE - {"PersistentVolumeClaim"})
            for m in kube.metadata(kind, ns, selector)
            if (kind, m["name"]) not in wanted and kube.delete(kind, ns, m["name"])]


POLICY = "tfhelm-user-services"
PRIORITY_POLICY = "tfhelm-user-priorities"


def _with_queue(opts: userspec.UserOptions, values: dict, kube: Kube) -> dict:
    """The values with the workspace's Kueue queue where Kueue is installed (unless
    --no-queue); asked for (a --queue-* option) where it is not: a usage error."""
    serves = opts.queue is not False and kube.serves_kueue()
    if opts.queue_asked() or opts.queue:
        if not serves:
            raise SpecError("--queue", "this cluster has no Kueue (kueue.x-k8s.io is not served)",
                            "install Kueue, or leave the --queue-*, --borrow-* and --priority options out")
    elif serves:
        values = userspec.compute_user_values(dataclasses.replace(opts, queue=True))
    queue = userspec.queue_settings(values)
    if queue["enabled"]:
        flavor = queue["flavor"]
        if kube.read_resource_flavor(flavor) is None:
            raise SpecError("--queue-flavor", f"no Kueue ResourceFlavor '{flavor}' (the workspace's quota is of it)",
                            "see `kubectl get resourceflavors`, or pass --no-queue")
    return values


def apply_policies(kube: Kube, more: list[dict] = ()) -> None:
    """The cluster-wide policies that fence every user namespace, after `more` (the Kueue
    priorities' where workspaces have queues), by server-side apply (the same objects again
    change nothing), the Services' last: `wait_service_policy` waits until the API server
    enforces it, and so the others applied before it."""
    for obj in [*more, *userspec.cluster_policies()]:
        if not kube.serves(obj):  # ValidatingAdmissionPolicy is GA since 1.30
            raise TfhelmError(f"this cluster does not serve {obj['kind']} ({obj['apiVersion']}): "
                              "Kubernetes 1.30 or later is needed to fence the users' namespaces "
                              f"(ValidatingAdmissionPolicy {obj['metadata']['name']})")
        kube.apply(obj)


def wait_service_policy(kube: Kube, ns: str, timeout: float = 30) -> None:
    """Until the API server enforces the policy in `ns` (it starts a moment after it is
    created): a server-side dry run of a Service nobody may create there must be refused."""
    probe = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "tfhelm-policy-probe"},
             "spec": {"type": "LoadBalancer", "loadBalancerIP": "192.0.2.1", "ports": [{"port": 80}]}}
    deadline = time.monotonic() + timeout
    while True:
        try:
            kube.dry_run_apply(ns, [probe])
        except AdmissionRefused as err:
            if POLICY in err.reason:
                return
            raise
        if time.monotonic() > deadline:
            raise TfhelmError(f"ValidatingAdmissionPolicy {POLICY} is not enforced in namespace {ns} "
                              f"after {timeout:.0f}s; check `kubectl get validatingadmissionpolicybinding {POLICY}`")
        time.sleep(0.5)


def workspace_queue(user: str, kube: Kube) -> str | None:
    """The Kueue LocalQueue of a user's workspace (None: it has none, Kueue is not installed,
    or the caller may not read LocalQueues: a workspace made without a queue grants no such
    right to its notebook)."""
    try:
        found = kube.local_queues(userspec.user_namespace(user), userspec.local_queue_selector(user))
    except Forbidden:
        return None
    return found[0]["metadata"]["name"] if len(found) == 1 else None


def require_workspace(user: str, kube: Kube) -> None:
    """`tfhelm up --user`: the user's namespace must be a workspace `tfhelm user add` made
    (Pod Security, quota, isolation); else a usage error, before anything is created."""
    ns = userspec.user_namespace(user)
    existing = kube.read_namespace(ns)
    if existing is None:
        raise SpecError("--user", f"user {user} has no workspace (no namespace {ns})",
                        f"a cluster admin creates it with `tfhelm user add {user}`")
    if _user_of(existing) != user:
        raise SpecError("--user", f"namespace {ns} is not the workspace of user {user} "
                        f"(no label {userspec.USER_LABEL}={user})", "see `tfhelm user list`")
    if _terminating(existing):
        raise SpecError("--user", f"the workspace of user {user} is being deleted")


def not_ready(user: str, kube: Kube) -> dict[str, str]:
    """The workspace's Deployments that are not available yet, each with the reason its
    pod gives (e.g. `ContainerCreating`, `ImagePullBackOff`)."""
    ns = userspec.user_namespace(user)
    selector = f"app.kubernetes.io/instance={userspec.RELEASE}"
    waiting: dict[str, str] = {}
    for d in kube.deployments(ns, selector):
        if not _short(d, "availableReplicas"):
            continue
        component = _labels(d).get("app.kubernetes.io/component", d["metadata"]["name"])
        reason = "starting"
        for pod in kube.pods(ns, _selector(d["spec"]["selector"].get("matchLabels") or {})):
            status = pod.get("status") or {}
            for cs in status.get("containerStatuses") or []:
                state = (cs.get("state") or {}).get("waiting")
                if state is not None:
                    reason = state.get("reason") or reason
            if status.get("phase") == "Pending" and not pod["spec"].get("nodeName"):
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


def _labels(obj: dict) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def _short(deployment: dict, counted: str) -> bool:
    """Fewer replicas `counted` (availableReplicas, readyReplicas) than the Deployment wants?"""
    have = (deployment.get("status") or {}).get(counted) or 0
    return have < (deployment["spec"].get("replicas") or 0)


def _user_of(ns: dict) -> str | None:
    return _labels(ns).get(userspec.USER_LABEL)


def _terminating(ns: dict) -> bool:
    return (ns.get("status") or {}).get("phase") == "Terminating"


def _gone(obj: dict) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def _ensure_namespace(kube: Kube, user: str) -> bool:
    """Create the namespace, or put its labels back; True when this call created it."""
    ns = userspec.user_namespace(user)
    labels = userspec.namespace_labels(user)
    existing = kube.read_namespace(ns)
    if existing is None:
        if not kube.create_namespace(ns, labels):
            raise TfhelmError(f"namespace {ns} was created by someone else just now; try again")
        return True
    if _user_of(existing) != user:
        raise TfhelmError(f"namespace {ns} exists but is not the workspace of user {user} "
                          f"(no label {userspec.USER_LABEL}={user}); remove it or pick another name")
    if _terminating(existing):
        raise TfhelmError(f"namespace {ns} is still being deleted; try again once it is gone")
    kube.label_namespace(ns, labels)
    return False


def _ensure_token(kube: Kube, ns: str, user: str) -> bool:
    """Create the login token Secret unless it exists; True when this call created it."""
    name = userspec.token_secret()
    if kube.read_secret(ns, name) is not None:
        return False
    return kube.create_secret(ns, {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "labels": {userspec.USER_LABEL: user, **userspec.MANAGED_BY}},
        "stringData": {userspec.TOKEN_KEY: secrets.token_urlsafe(32)}})


# The workspace release's kinds that `remove` deletes (by label, tfhelm/releases.py); its
# PVCs and its fence (NetworkPolicies, quota, LimitRange) stay, as Helm keeps them.
WORKSPACE_KINDS = ("Deployment", "Service", "Ingress", "ConfigMap", "PersistentVolumeClaim", "NetworkPolicy",
                   "ResourceQuota", "LimitRange", "RoleBinding", "Role", "ServiceAccount", "LocalQueue",
                   "ClusterQueue")
FENCE = frozenset({"PersistentVolumeClaim", "NetworkPolicy", "ResourceQuota", "LimitRange"})
SA_TOKEN = "kubernetes.io/service-account-token"


@dataclass
class Removal:
    """What `remove` did: each "Kind name" deleted (the workspace) and revoked (every
    identity and grant in the namespace), and what it kept (volumes, fence)."""
    deleted: list[str]
    revoked: list[str]
    kept: list[str]


def remove(user: str, kube: Kube, purge: bool = False, notify: Notify = lambda _: None) -> Removal | None:
    """Remove the workspace and revoke everything its user could act with: the namespace's
    ServiceAccounts (their tokens stop working at once) but `default`, token Secrets, Roles
    and RoleBindings (made by the chart, by the user, by their TF clusters' reapers), and
    the login token. The release goes by its labels, its record unread (tfhelm/releases.py).
    The namespace, its volumes and its fence (NetworkPolicies, quota, LimitRange) stay unless
    `purge` (which deletes the namespace with everything in it, TF clusters too), so whatever
    still runs there stays isolated. None when the user has no workspace."""
    ns = userspec.user_namespace(user)
    existing = kube.read_namespace(ns)
    if existing is None or _user_of(existing) != user or _terminating(existing):
        return None
    revoked = _revoke(kube, ns)  # first: the user's tokens stop working before anything else goes
    gone = releases.remove(kube, ns, userspec.RELEASE, WORKSPACE_KINDS, keep=FENCE)
    if gone.found:
        notify(f"uninstalled release {ns}/{userspec.RELEASE} (its objects, by their labels; no hooks run)")
    revoked += _revoke(kube, ns)  # what the user made meanwhile
    name = userspec.token_secret()
    if kube.delete_secret(ns, name):
        revoked.append(f"Secret {name} (the login token)")
    if revoked:
        notify(f"revoked in {ns}: {', '.join(revoked)}")
    if purge:
        # The Jobs first, and their pods released from the Job controller's finalizer, which
        # Kubernetes up to 1.36.3 may leave on them and keep the namespace deleting forever
        # (Kube.release_tracking_finalizers).
        for meta in kube.metadata("Job", ns):
            kube.delete("Job", ns, meta["name"])
        kube.release_tracking_finalizers(ns)
        kube.delete_namespace(ns)
        notify(f"deleting namespace {ns}: the code, logs and data volumes and all in it")
    return Removal(gone.deleted, revoked, gone.kept)


def _revoke(kube: Kube, ns: str) -> list[str]:
    """Delete every identity and grant in the namespace: ServiceAccounts but `default` (a
    bound token stops working with its account), service-account token Secrets, RoleBindings
    and Roles. What was deleted, as "Kind name"."""
    revoked = []
    for kind in ("ServiceAccount", "RoleBinding", "Role"):
        for meta in kube.metadata(kind, ns):
            if not (kind == "ServiceAccount" and meta["name"] == "default") and kube.delete(kind, ns, meta["name"]):
                revoked.append(f"{kind} {meta['name']}")
    for name in kube.secret_names(ns, f"type={SA_TOKEN}"):
        if kube.delete_secret(ns, name):
            revoked.append(f"Secret {name} (a ServiceAccount token)")
    return revoked


def still_running(user: str, kube: Kube) -> list[str]:
    """What still runs in a user's namespace: TF clusters by name, other pods counted."""
    ns = userspec.user_namespace(user)
    live = [p for p in kube.pods(ns)
            if (p.get("status") or {}).get("phase") in ("Pending", "Running") and not _gone(p)]
    clusters = sorted({_labels(p).get(CLUSTER_LABEL) for p in live} - {None})
    others = sum(1 for p in live if CLUSTER_LABEL not in _labels(p))
    return [f"TF cluster {c}" for c in clusters] + ([f"{others} other pod(s)"] if others else [])


@dataclass
class Urls:
    notebook: str | None  # with `?token=`
    tensorboard: str | None
    files: str | None  # in-cluster


def urls(user: str, kube: Kube) -> Urls:
    """Where the user's notebook (with its login token), TensorBoard and files answer."""
    ns = userspec.user_namespace(user)
    name = userspec.token_secret()
    data = (kube.read_secret(ns, name) or {}).get("data") or {}
    if userspec.TOKEN_KEY not in data:
        raise SpecError("NAME", f"no login token in secret {ns}/{name}", f"add the user with `tfhelm user add {user}`")
    token = base64.b64decode(data[userspec.TOKEN_KEY]).decode()
    notebook, tensorboard = _url(kube, ns, "notebook"), _url(kube, ns, "tensorboard")
    return Urls(notebook=notebook and f"{notebook}?token={token}",
                tensorboard=tensorboard and (f"{tensorboard}?token={token}"
                                             if _behind_login(kube, ns) else tensorboard),
                files=_url(kube, ns, "files"))


def _behind_login(kube: Kube, ns: str) -> bool:
    """Does TensorBoard run behind its login proxy (`tensorboard.auth.enabled`)?"""
    name = userspec.component_name("tensorboard")
    d = kube.read_deployment(ns, name)
    return bool(d) and any(c["name"] == "auth" for c in d["spec"]["template"]["spec"]["containers"])


def _url(kube: Kube, ns: str, component: str) -> str | None:
    """An Ingress host, else a load balancer, else the node port on the pod's node
    (externalTrafficPolicy: Local), else the in-cluster Service address."""
    name = userspec.component_name(component)
    ingress = (kube.read_ingress(ns, name) or {}).get("spec") or {}
    host = ingress.get("rules") and ingress["rules"][0].get("host")
    if host:
        tls = any(host in (t.get("hosts") or []) for t in ingress.get("tls") or [])
        return f"{'https' if tls else 'http'}://{host}/"
    svc = kube.read_service(ns, name)
    if svc is None:
        return None
    spec, port = svc["spec"], svc["spec"]["ports"][0]
    balancers = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if spec.get("type") == "LoadBalancer" and balancers:
        return f"http://{balancers[0].get('ip') or balancers[0].get('hostname')}:{port['port']}/"
    if spec.get("type") in ("NodePort", "LoadBalancer"):
        address = _pod_node_address(kube, ns, name, spec.get("selector") or {})
        return f"http://{address}:{port['nodePort']}/"
    return f"http://{name}.{ns}.svc:{port['port']}/"


def _pod_node_address(kube: Kube, ns: str, name: str, selector: dict[str, str]) -> str:
    nodes = [p["spec"]["nodeName"] for p in kube.pods(ns, _selector(selector))
             if p["spec"].get("nodeName") and not _gone(p)]
    if not nodes:
        raise TfhelmError(f"{ns}/{name}: no pod is scheduled yet, and its node port answers only on "
                          f"the pod's node; see `kubectl -n {ns} get pods`")
    node = kube.read_node(nodes[0]) or {}
    addresses = {a["type"]: a["address"] for a in (node.get("status") or {}).get("addresses") or []}
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
    for ns in kube.namespaces(_OURS):
        name = ns["metadata"]["name"]
        if _terminating(ns):
            state = "being deleted"
        else:
            deps = kube.deployments(name, f"app.kubernetes.io/instance={userspec.RELEASE}")
            ready = sum(not _short(d, "readyReplicas") for d in deps)
            state = ("removed (volumes kept)" if not deps else
                     "ready" if ready == len(deps) else f"starting ({ready}/{len(deps)} ready)")
        rows.append(UserRow(_user_of(ns), name, state))
    return sorted(rows, key=lambda r: r.user)
