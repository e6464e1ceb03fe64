"""A user's workspace spec: names, namespace, quota and chart values, without any I/O (the
workspace's twin of tfhelm.cluster.spec; tfhelm.workspace.actions does the I/O).

A user NAME gets the namespace `tfhelm-user-NAME` and, in it, one release `user-env` of
charts/user-env. The workspace owns its namespace, so resource names derive from the
release, not the user; they mirror user-env's `templates/_helpers-names.tpl`, and
tests/chart/test_user_env.py proves both agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import PurePosixPath
from urllib.parse import quote, urlparse


from tfhelm import contract, yamlio
from tfhelm.chart import chart_path, default_values
from tfhelm.cluster import spec
from tfhelm.cluster.values import script_values
from tfhelm.errors import SpecError

CHART = "user-env"
RELEASE = "user-env"
NAMESPACE_PREFIX = "tfhelm-user-"
MAX_USER = spec.DNS_LABEL_MAX - len(NAMESPACE_PREFIX)  # the namespace is a DNS label
USER_LABEL = contract.label("user")
MANAGED_BY = {"app.kubernetes.io/managed-by": "tfhelm", "app.kubernetes.io/part-of": "tfhelm"}
TOKEN_KEY = "token"
NODE_PORTS = range(contract.limit("nodePortMin"), contract.limit("nodePortMax") + 1)
_QUOTA = {  # --quota-* option: flag, accepted form, example
    "cpu": ("--quota-cpu", re.compile(r"^[0-9]+(\.[0-9]+)?m?$"), "8 or 500m"),
    "memory": ("--quota-memory",
               re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"), "64Gi"),
}


def validate_user(name: str, field: str = "NAME") -> str:
    if not spec.DNS1035.fullmatch(name):
        raise SpecError(field, f"'{name}' is not a valid user name",
                        "use lowercase letters, digits and '-', starting with a letter")
    if len(name) > MAX_USER:
        raise SpecError(field, f"'{name}' is {len(name)} characters; the namespace "
                        f"'{NAMESPACE_PREFIX}{name}' must fit in {spec.DNS_LABEL_MAX}",
                        f"use at most {MAX_USER} characters")
    return name


def user_namespace(user: str) -> str:
    """The namespace holding a user's workspace and TF clusters."""
    return NAMESPACE_PREFIX + validate_user(user)


def namespace_labels(user: str) -> dict[str, str]:
    """Pod Security "restricted" (enforced, audited, warned) and who the namespace is for."""
    labels = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
    return {**labels, "pod-security.kubernetes.io/enforce-version": "latest",
            USER_LABEL: validate_user(user), **MANAGED_BY}


def component_name(component: str) -> str:
    """Deployment and Service of `notebook`, `tensorboard` or `files` (the code server)."""
    return f"{RELEASE}-{component}"


def claim_name(volume: str) -> str:
    """PVC of `code`, `logs` or `data`."""
    return f"{RELEASE}-{volume}"


def notebook_path(namespace: str, claim: str) -> str | None:
    """Where the notebook of a workspace mounts this PVC of its namespace (the logs volume:
    /log, as the TF clusters' tasks do); None for any other."""
    if namespace.startswith(NAMESPACE_PREFIX) and claim == claim_name("logs"):
        return "/log"
    return None


def token_secret() -> str:
    """The Secret `tfhelm user add` creates; the chart reads it unless told another."""
    return f"{RELEASE}-notebook-token"


def service_account() -> str:
    """The notebook's ServiceAccount (and its Role and RoleBinding)."""
    return f"{RELEASE}-notebook"


POLICIES = "services"  # files/policies/services.yaml: applied last, its enforcement waited for


def cluster_policies() -> list[dict]:
    """The cluster-wide ValidatingAdmissionPolicies and their bindings that fence every user
    namespace (charts/user-env/files/policies/: Services, the workspace's release record,
    NetworkPolicies, the user node), the Services' last."""
    files = sorted((chart_path(CHART) / "files" / "policies").glob("*.yaml"),
                   key=lambda f: (f.stem == POLICIES, f.name))
    return [doc for f in files for doc in yamlio.load_docs(f.read_text())]


def policy_names() -> list[str]:
    return [o["metadata"]["name"] for o in cluster_policies() if o["kind"] == "ValidatingAdmissionPolicy"]


def files_url(user: str) -> str:
    """In-cluster URL of the user's file server (the code volume), ending in `/`."""
    port = default_values(CHART)["codeServer"]["service"]["port"]
    return f"http://{component_name('files')}.{user_namespace(user)}.svc:{port}/"


@dataclass
class UserOptions:
    """What `tfhelm user add` was asked for; None (or empty) means "leave the chart's value"."""

    name: str
    storage_class: str | None = None
    quota_cpu: str | None = None
    quota_memory: str | None = None
    node_port: int | None = None
    tensorboard_node_port: int | None = None
    quota_gpus: int | None = None
    quota_objects: list[str] = field(default_factory=list)  # --quota KEY=N
    priority_classes: list[str] = field(default_factory=list)
    metrics_from: list[str] = field(default_factory=list)  # namespaces
    max_cpu: str | None = None
    max_memory: str | None = None
    # Kueue (user-env `queue`): None means "where Kueue is installed" (actions.add decides).
    queue: bool | None = None
    queue_cpu: str | None = None  # nominal quota
    queue_memory: str | None = None
    borrow_cpu: str | None = None  # borrowing limit
    borrow_memory: str | None = None
    queue_flavor: str | None = None
    priorities: list[str] = field(default_factory=list)  # WorkloadPriorityClasses it may use

    def queue_asked(self) -> bool:
        """Did any --queue-* / --borrow-* / --priority option ask for a queue?"""
        return any(v is not None for v in (self.queue_cpu, self.queue_memory, self.borrow_cpu,
                                            self.borrow_memory, self.queue_flavor)) or bool(self.priorities)


def compute_user_values(opts: UserOptions) -> dict:
    """The user-env values of a user's release: only what differs from the chart's defaults.
    Never the token: the chart reads it from the Secret."""
    v: dict = {"userName": validate_user(opts.name)}
    if opts.storage_class is not None:
        if (not contract.regex("dns1123Subdomain").fullmatch(opts.storage_class)
                or len(opts.storage_class) > contract.limit("dnsSubdomain")):
            raise SpecError("--storage-class", f"'{opts.storage_class}' is not a StorageClass name",
                            "see `kubectl get storageclass`")
        v["storage"] = {"storageClassName": opts.storage_class}
    quota = {resource: _quota(resource, value)
             for resource, value in (("cpu", opts.quota_cpu), ("memory", opts.quota_memory))
             if value is not None}
    if opts.quota_gpus is not None:
        if opts.quota_gpus < 0:
            raise SpecError("--quota-gpus", f"must be 0 or more, got {opts.quota_gpus}")
        quota["gpus"] = opts.quota_gpus
    objects = dict(_quota_object(item) for item in opts.quota_objects)
    if objects:
        quota["objects"] = objects  # over the chart's: Helm merges maps
    if opts.priority_classes:
        quota["priorityClasses"] = [_priority_class(c) for c in dict.fromkeys(opts.priority_classes)]
    if quota:
        v["quota"] = quota
    limits = {resource: _quantity(flag, value, example)
              for resource, flag, value, example in (("cpu", "--max-cpu", opts.max_cpu, "8 or 500m"),
                                                     ("memory", "--max-memory", opts.max_memory, "32Gi"))
              if value is not None}
    if limits:
        default = default_values(CHART)["limitRange"]
        # The default CPU limit follows the largest: a container may ask for any CPU up to it.
        v["limitRange"] = {"max": {**default["max"], **limits},
                           **({"default": {**default["default"], "cpu": limits["cpu"]}} if "cpu" in limits else {})}
    if opts.metrics_from:
        v["networkPolicy"] = {"metricsFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": spec.validate_namespace(ns, "--metrics-from")}}}
            for ns in dict.fromkeys(opts.metrics_from)]}
    ports = {"notebook": ("--node-port", opts.node_port),
             "tensorboard": ("--tensorboard-node-port", opts.tensorboard_node_port)}
    for component, (flag, port) in ports.items():
        if port is None:
            continue
        if port not in NODE_PORTS:
            raise SpecError(flag, f"{port} is outside the node port range "
                            f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}")
        v[component] = {"service": {"nodePort": port}}
    if opts.node_port is not None and opts.node_port == opts.tensorboard_node_port:
        raise SpecError("--tensorboard-node-port", "is the same as --node-port",
                        "each Service needs its own node port")
    queue = _queue_values(opts)
    if queue:
        v["queue"] = queue
    return v


def _quota_object(item: str) -> tuple[str, str]:
    """`--quota count/configmaps=50`: a ResourceQuota key and a whole number."""
    key, sep, value = item.partition("=")
    if not sep or not contract.regex("quotaCount").fullmatch(key) or not value.isdigit():
        raise SpecError("--quota", f"'{item}' is not KEY=N",
                        "e.g. --quota pods=100 or --quota count/configmaps=50 (count/<resource>[.<group>])")
    return key, value


def _priority_class(name: str) -> str:
    if name.startswith("system-"):
        raise SpecError("--priority-class", f"'{name}' is one of Kubernetes' own classes",
                        "the system-* classes are for the cluster's own pods: grant one made for users")
    if not contract.regex("dns1123Subdomain").fullmatch(name) or len(name) > contract.limit("dnsSubdomain"):
        raise SpecError("--priority-class", f"'{name}' is not a PriorityClass name", "see `kubectl get priorityclass`")
    return name


def _quantity(flag: str, value: str, example: str) -> str:
    """`--max-cpu`, `--max-memory`: a quantity, no less than a workspace container's own limit."""
    resource = "cpu" if "cpu" in flag else "memory"
    if not _QUOTA[resource][1].match(value):
        raise SpecError(flag, f"'{value}' is not a Kubernetes quantity", f"e.g. {example}")
    own = max((parse_quantity(r["limits"][resource]) for r in _workspace_resources()
               if resource in r.get("limits", {})), default=Decimal(0))
    if parse_quantity(value) < own:
        raise SpecError(flag, f"{value} is less than a workspace container's own limit ({float(own) / 2**20:g}Mi)",
                        "the notebook would be refused")
    return value


def _queue_values(opts: UserOptions) -> dict:
    """The user-env `queue` values: the workspace's Kueue ClusterQueue and LocalQueue."""
    if opts.queue is False:
        if opts.queue_asked():
            raise SpecError("--no-queue", "goes with no --queue-*, --borrow-* or --priority option")
        return {}
    if not (opts.queue or opts.queue_asked()):
        return {}
    q: dict = {"enabled": True}
    for key, flags in (("nominalQuota", (("cpu", "--queue-cpu", opts.queue_cpu), ("memory", "--queue-memory", opts.queue_memory))),
                       ("borrowingLimit", (("cpu", "--borrow-cpu", opts.borrow_cpu), ("memory", "--borrow-memory", opts.borrow_memory)))):
        given = {resource: _kueue_quantity(resource, flag, value) for resource, flag, value in flags if value is not None}
        if given:
            q[key] = given
    if opts.queue_flavor is not None:
        q["flavor"] = _kueue_name("--queue-flavor", opts.queue_flavor, "resourceflavors")
    if opts.priorities:
        q["priorityClasses"] = sorted({_kueue_name("--priority", p, "workloadpriorityclasses") for p in opts.priorities})
    return q


def _kueue_quantity(resource: str, flag: str, value: str) -> str:
    _, pattern, example = _QUOTA[resource]
    if not pattern.match(value):
        raise SpecError(flag, f"'{value}' is not a Kubernetes quantity", f"e.g. {example}")
    return value


def _kueue_name(flag: str, value: str, kind: str) -> str:
    if not (spec.DNS1123_SUBDOMAIN.fullmatch(value) and len(value) <= spec.DNS_LABEL_MAX):
        raise SpecError(flag, f"'{value}' is not the name of a Kueue object",
                        f"lowercase letters, digits, '-' and '.', at most 63; see `kubectl get {kind}`")
    return value


def queue_settings(values: dict) -> dict:
    """The workspace's `queue` values with the chart's defaults under them."""
    return {**default_values(CHART)["queue"], **(values.get("queue") or {})}


def priority_policy() -> list[dict]:
    """The cluster-wide ValidatingAdmissionPolicy and its binding that let a user namespace
    set only the WorkloadPriorityClasses its admin granted (charts/user-env/files/priority-policy.yaml)."""
    return yamlio.load_docs((chart_path(CHART) / "files" / "priority-policy.yaml").read_text())


def local_queue_selector(user: str) -> str:
    """The labels of the LocalQueue the chart makes for a user's workspace."""
    return f"{USER_LABEL}={validate_user(user)},app.kubernetes.io/instance={RELEASE}"


def parse_quantity(value) -> Decimal:
    """Kubernetes' quantity rule (the client's own), imported only when a quota is given:
    every cluster command reads this module, and the client takes a while to import."""
    from kubernetes.utils import parse_quantity as parse

    return parse(value)


def _quota(resource: str, value: str) -> str:
    flag, pattern, example = _QUOTA[resource]
    if not pattern.match(value):
        raise SpecError(flag, f"'{value}' is not a Kubernetes quantity", f"e.g. {example}")
    own = workspace_requests(resource)
    if parse_quantity(value) < own:
        # Below this the workspace's own pods are refused and the install times out.
        shown = f"{float(own):g}" if resource == "cpu" else f"{float(own) / 2**20:g}Mi"
        raise SpecError(flag, f"{value} is less than the workspace itself requests ({shown})",
                        "leave room for the notebook, TensorBoard, the file server and TF clusters")
    return value


def workspace_requests(resource: str) -> Decimal:
    """What the chart's notebook, TensorBoard (with its login proxy) and file server request
    together."""
    return sum(parse_quantity(r["requests"][resource]) for r in _workspace_resources())


def _workspace_resources() -> list[dict]:
    """The resources of the chart's notebook, TensorBoard (and its login proxy), file server."""
    v = default_values(CHART)
    containers = [v[c]["resources"] for c in ("notebook", "tensorboard", "codeServer")]
    if v["tensorboard"]["auth"]["enabled"]:
        containers.append(v["tensorboard"]["auth"]["resources"])
    return containers


def code_volume_path(script: str, field: str = "--script") -> PurePosixPath:
    """A relative `--script` (or another path) under `--user`: a path on the user's code volume."""
    path = PurePosixPath(script)
    if not path.parts or script.endswith("/") or ".." in path.parts:
        raise SpecError(field, f"'{script}' is not a path on the code volume",
                        "give a path relative to the notebook's work directory, e.g. models/train.py")
    if any(part.startswith(".") for part in path.parts):
        raise SpecError(field, f"'{script}' is a dot-file or in a dot-directory",
                        "the file server does not serve those; move it")
    return path


def files_dir_url(user: str, directory: str, field: str) -> str:
    """A directory on the user's code volume as their file server's URL (its listing is what
    `pip --find-links` reads); an http(s) URL or an absolute path is taken as it is."""
    if urlparse(directory).scheme or directory.startswith("/"):
        return directory
    path = code_volume_path(directory.rstrip("/") or directory, field)
    return files_url(user) + quote(str(path)) + "/"


def cluster_values_for_user(user: str, script: str | None, queue: str | None = None) -> dict:
    """tf-cluster values wiring a cluster to a user's workspace: the user's logs and data
    volumes (so TensorBoard sees the run), the workspace's Kueue LocalQueue (`queue`, when it
    has one) and, for a relative `script`, the code downloaded from the user's file server.
    An http(s) URL or an absolute path (in the image) is taken as `tfhelm up --script` takes
    it. Meant as the lowest-precedence values file."""
    v: dict = {"storage": {vol: {"existingClaim": claim_name(vol)} for vol in ("logs", "data")}}
    if queue:
        v["queue"] = {"name": queue}
    if script is None:
        return v
    if urlparse(script).scheme or script.startswith("/"):
        v["code"] = script_values(script)
        return v
    path = code_volume_path(script)
    v["code"] = {"source": "url", "url": files_url(user) + quote(str(path)), "script": path.name}
    return v
