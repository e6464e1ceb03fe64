"""Kueue in the local cluster: its manager (cmd/kueue of sigs.k8s.io/kueue, built by `make
kueue`) as a host process beside the control plane, under its own ServiceAccount and the
module's ClusterRole, its CRDs installed and its webhooks registered by URL on 127.0.0.1 with a
CA made here (the API server runs on the host too). Only Kueue's `batch/job` integration runs
(the queue bench adds `kubeflow.org/tfjob`, its peer), and its webhooks see only objects with a
queue label, so a cluster whose Kueue is stopped still takes every other Job. Then a
ResourceFlavor `default-flavor` for the training nodes and a ClusterQueue `training` covering
them, less some room per node for what Kueue does not count (a queued TF cluster's PS, chief
and evaluator, the reapers: docs/queue.md).

    start()   (idempotent; the local cluster must run)     stop()   (leaves nothing)
    running() leftovers()

State: <local_dir>/kueue (config, certificates, the manager's kubeconfig, log, pid). Kueue reads
its metrics certificate from the fixed /etc/kueue/metrics/certs; stop() removes that too.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from decimal import Decimal
from pathlib import Path

import yaml

from tfhelm.contract import QUEUE_LABEL
from tfhelm_dev import localcluster, localnode

NAMESPACE, ACCOUNT = "kueue-system", "kueue-controller-manager"
ROLES = {"manager-role": "kueue-manager-role", "metrics-auth-role": "kueue-metrics-auth-role",
         "manager-secrets-role": "kueue-manager-secrets-role"}
WEBHOOK_NAMES = {"MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
                 "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration"}
# Fixed ports on 127.0.0.1 (one local cluster per machine), away from the bench's operator.
PORTS = {"webhook": 27443, "metrics": 27080, "health": 27081}
FLAVOR, CLUSTER_QUEUE = "default-flavor", "training"
# The integrations Kueue may run, each with the (group, resource) its webhooks take; only those
# enabled keep their webhooks (and Kueue's own objects' webhooks always).
INTEGRATIONS = {"batch/job": ("batch", "jobs"), "kubeflow.org/tfjob": ("kubeflow.org", "tfjobs")}
FRAMEWORKS = ("batch/job",)
# Per training node, left out of the ClusterQueue's quota for pods Kueue does not count.
HEADROOM = {"cpu": Decimal("0.5"), "memory": Decimal(2 * 2**30)}
METRICS_CERTS = Path("/etc/kueue/metrics/certs")  # fixed in cmd/kueue when it makes no certs itself


class LocalKueueError(localcluster.LocalClusterError):
    """Kueue could not be started or stopped."""


def state_dir() -> Path:
    return localcluster.local_dir() / "kueue"


def _pid_file() -> Path:
    return state_dir() / "pid"


def _config() -> Path:
    return state_dir() / "config.yaml"


def binaries() -> tuple[Path, Path]:
    """The manager and its manifests (`make kueue`): the checkout's bin/, else the build cache."""
    version = _kueue_version()
    for d in (localcluster.REPO_ROOT / "bin", localcluster.cache_dir() / "bin" / version):
        if (d / "kueue").is_file() and (d / "kueue-manifests.yaml").is_file():
            return d / "kueue", d / "kueue-manifests.yaml"
    raise LocalKueueError(f"no Kueue {version} binary and manifests; run `make kueue`")


def _kueue_version() -> str:
    for line in (localcluster.REPO_ROOT / "mk" / "versions.mk").read_text().splitlines():
        if line.startswith("KUEUE_VERSION"):
            return line.split(":=", 1)[1].strip()
    raise LocalKueueError("no KUEUE_VERSION in mk/versions.mk")


# ---------------------------------------------------------------- the process

def _pid() -> int | None:
    """The manager's pid, if it runs from this checkout's state (pids are reused)."""
    try:
        pid = int(_pid_file().read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError):
        return None
    return pid if state != "Z" and str(_config()) in cmdline else None


def _ready() -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORTS['health']}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def running() -> bool:
    return _pid() is not None and _ready()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


# ---------------------------------------------------------------- certificates and objects

def _certs(certs: Path) -> None:
    """A CA, and the webhook server's certificate for 127.0.0.1 signed by it."""
    certs.mkdir(parents=True, exist_ok=True)

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=certs, check=True, capture_output=True)
    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
         "-days", "30", "-subj", "/CN=tfhelm-local-kueue-ca")
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr",
         "-subj", "/CN=127.0.0.1")
    (certs / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ossl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-days", "30", "-extfile", "ext", "-out", "tls.crt")
    for f in certs.iterdir():
        f.chmod(0o600)


def _ca_bundle() -> str:
    return base64.b64encode((state_dir() / "certs" / "ca.crt").read_bytes()).decode()


def _manifests(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _url(path: str) -> str:
    return f"https://127.0.0.1:{PORTS['webhook']}{path}"


# The CRDs whose versions Kueue converts (config/components/crd/kustomization.yaml patches
# these only: a ResourceFlavor, for one, is not convertible).
CONVERTED = {"clusterqueues", "localqueues", "cohorts", "workloads", "multikueueclusters"}


def _crds(docs: list[dict]) -> list[dict]:
    """The CRDs, the conversion webhook of those Kueue converts (it serves /convert) by URL."""
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        if crd["spec"]["names"]["plural"] in CONVERTED:
            crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": _url("/convert"), "caBundle": _ca_bundle()},
                "conversionReviewVersions": ["v1"]}}
    return crds


def _webhooks(docs: list[dict], frameworks) -> list[dict]:
    """The module's webhook configurations, only for the enabled integrations and Kueue's own
    objects, each called by URL; an integration's only for objects with a queue label."""
    resources = {INTEGRATIONS[f] for f in frameworks}
    out = []
    for config in (d for d in docs if d["kind"] in WEBHOOK_NAMES):
        config["metadata"] = {"name": WEBHOOK_NAMES[config["kind"]], "labels": {"app.kubernetes.io/part-of": "tfhelm"}}
        kept = []
        for hook in config["webhooks"]:
            rules = {(g, r) for rule in hook["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
            if not all(g == "kueue.x-k8s.io" or (g, r) in resources for g, r in rules):
                continue
            hook["clientConfig"] = {"url": _url(hook["clientConfig"]["service"]["path"]), "caBundle": _ca_bundle()}
            if rules & resources:
                hook["objectSelector"] = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
            hook["timeoutSeconds"] = 10
            kept.append(hook)
        config["webhooks"] = kept
        out.append(config)
    return out


def _rbac(docs: list[dict]) -> list[dict]:
    """Kueue's own ServiceAccount and the module's roles (ClusterRoles, and its Role in its
    namespace), each bound to it."""
    roles = [d for d in docs if d["kind"] in ("ClusterRole", "Role") and d["metadata"]["name"] in ROLES]
    bindings = []
    for role in roles:
        name = ROLES[role["metadata"]["name"]]
        role["metadata"] = {"name": name, **({"namespace": NAMESPACE} if role["kind"] == "Role" else {})}
        bindings.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{role['kind']}Binding",
                         "metadata": dict(role["metadata"]),
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": name},
                         "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]})
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}}
    return [account, *roles, *bindings]


def _configuration(frameworks) -> dict:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{PORTS['health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{PORTS['metrics']}"},
        "webhook": {"port": PORTS["webhook"], "host": "127.0.0.1", "certDir": str(state_dir() / "certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(frameworks)},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def _kubeconfig(kubectl) -> Path:
    """A kubeconfig of Kueue's ServiceAccount (a token of a day: the local cluster lives hours)."""
    token = kubectl("create", "token", ACCOUNT, "-n", NAMESPACE, "--duration", "24h").stdout.strip()
    admin = yaml.safe_load(localcluster.kubeconfig_path().read_text())
    cluster = admin["clusters"][0]
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
              "users": [{"name": ACCOUNT, "user": {"token": token}}],
              "contexts": [{"name": ACCOUNT, "context": {"cluster": cluster["name"], "user": ACCOUNT}}],
              "current-context": ACCOUNT}
    path = state_dir() / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def _quota(kubectl) -> dict[str, str] | None:
    """The training nodes' allocatable CPU and memory, less HEADROOM per node (None: no real
    training node, e.g. a kwok-only cluster)."""
    selector = f"{localnode.ROLE_LABEL}=training"
    nodes = json.loads(kubectl("get", "nodes", "-l", selector, "-o", "json").stdout)["items"]
    if not nodes:
        return None
    from kubernetes.utils import parse_quantity

    cpu = sum(parse_quantity(n["status"]["allocatable"]["cpu"]) - HEADROOM["cpu"] for n in nodes)
    memory = sum(parse_quantity(n["status"]["allocatable"]["memory"]) - HEADROOM["memory"] for n in nodes)
    return {"cpu": f"{int(cpu * 1000)}m", "memory": f"{int(memory) // 2**20}Mi"}


def queue_objects(quota: dict[str, str]) -> list[dict]:
    """The ResourceFlavor of the training nodes and the ClusterQueue `training` over them."""
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
              "spec": {"nodeLabels": {localnode.ROLE_LABEL: "training"}}}
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
          "spec": {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                   "preemption": {"withinClusterQueue": "LowerPriority"},
                   "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                       {"name": FLAVOR, "resources": [{"name": r, "nominalQuota": q} for r, q in quota.items()]}]}]}}
    return [flavor, cq]


# ---------------------------------------------------------------- API

def start(timeout: float = 120, frameworks=FRAMEWORKS) -> None:
    """Install and start Kueue in the running local cluster with these integrations (idempotent;
    a Kueue running with others is started again). An integration's CRD must be installed first."""
    if localcluster.status() is None:
        raise LocalKueueError("the local cluster is not running (`tfhelm cluster up`)")
    unknown = set(frameworks) - set(INTEGRATIONS)
    if unknown:
        raise LocalKueueError(f"no such Kueue integration here: {', '.join(sorted(unknown))}")
    bins = localcluster.bin_dir()

    def kubectl(*args, input=None):
        return localcluster._kubectl(bins, *args, input=input, timeout=120)
    configuration = yaml.safe_dump(_configuration(frameworks))
    if running() and _config().read_text() == configuration:
        _ensure_queue(kubectl)
        return
    stop(cluster=True)  # half-started, started by an earlier run or with other integrations: start over
    manager, manifests = binaries()
    for name, port in PORTS.items():
        if not _port_free(port):
            raise LocalKueueError(f"port 127.0.0.1:{port} ({name}) is taken: is another Kueue running?")
    state_dir().mkdir(parents=True, exist_ok=True)
    _certs(state_dir() / "certs")
    docs = _manifests(manifests)
    apply = lambda objs: kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",  # noqa: E731
                                 input=yaml.safe_dump_all(objs))
    crds = _crds(docs)
    apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, *crds, *_rbac(docs)])
    kubectl("wait", "--for=condition=Established", "--timeout=60s",
            *(f"crd/{c['metadata']['name']}" for c in crds))
    METRICS_CERTS.mkdir(parents=True, exist_ok=True)
    _owner_mark().write_text(str(state_dir()))
    for f in ("tls.crt", "tls.key"):
        shutil.copy(state_dir() / "certs" / f, METRICS_CERTS / f)
    _config().write_text(configuration)
    log = open(state_dir() / "kueue.log", "wb")
    proc = subprocess.Popen([str(manager), f"--config={_config()}", "--feature-gates=VisibilityOnDemand=false"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "KUBECONFIG": str(_kubeconfig(kubectl))})
    log.close()
    _pid_file().write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while not _ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = (state_dir() / "kueue.log").read_text(errors="replace")[-2000:]
            stop(cluster=True)
            raise LocalKueueError(f"Kueue did not become ready:\n{tail}")
        time.sleep(0.3)
    apply(_webhooks(docs, frameworks))  # once it answers: no Job waits on a webhook that is not there yet
    try:
        _ensure_queue(kubectl)
    except localcluster.LocalClusterError as e:
        status = localcluster._kubectl(bins, "get", "clusterqueue", CLUSTER_QUEUE, "-o", "jsonpath={.status}",
                                       check=False).stdout
        tail = (state_dir() / "kueue.log").read_text(errors="replace")[-3000:]
        stop(cluster=True)
        raise LocalKueueError(f"{e}\nClusterQueue {CLUSTER_QUEUE} status: {status}\nKueue's log ends:\n{tail}") from e


def _ensure_queue(kubectl) -> None:
    quota = _quota(kubectl)
    if quota is None:
        return
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(queue_objects(quota)))
    kubectl("wait", "--for=condition=Active", f"clusterqueue/{CLUSTER_QUEUE}", "--timeout=60s")


def stop(cluster: bool = True) -> None:
    """Stop Kueue. With the cluster still running (`cluster`), also remove what it installed:
    its webhooks first (no Job may wait on them), then, the manager stopped, its objects'
    finalizers and CRDs, its RBAC and namespace. Leaves no process, file or object."""
    bins = None
    if cluster and localcluster.status() is not None:
        bins = localcluster.bin_dir()
        for kind, name in WEBHOOK_NAMES.items():
            localcluster._kubectl(bins, "delete", kind.lower(), name, "--ignore-not-found", check=False)
    pid = _pid()
    if pid is not None:
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while _pid() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        if _pid() is not None:
            os.killpg(pid, signal.SIGKILL)
    if bins is not None:
        _remove_objects(bins)
    if _ours_in_etc():
        shutil.rmtree(METRICS_CERTS.parent.parent, ignore_errors=True)
    shutil.rmtree(state_dir(), ignore_errors=True)


def _remove_objects(bins: Path) -> None:
    def kubectl(*args, input=None):
        return localcluster._kubectl(bins, *args, input=input, check=False, timeout=120)
    crds = kubectl("get", "crd", "-o", "name").stdout.split()
    ours = [c.removeprefix("customresourcedefinition.apiextensions.k8s.io/") for c in crds
            if c.endswith(".kueue.x-k8s.io")]
    for crd in ours:  # no manager is left to remove its finalizers
        for obj in kubectl("get", crd, "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{'\\n'}{end}").stdout.split():
            ns, _, name = obj.rpartition("/")
            kubectl("patch", crd, name, *(["-n", ns] if ns else []), "--type=merge",
                    "-p", '{"metadata":{"finalizers":null}}')
    if ours:
        kubectl("delete", "crd", *ours, "--wait=true")
    for name in ROLES.values():
        kubectl("delete", "clusterrolebinding", name, "--ignore-not-found")
        kubectl("delete", "clusterrole", name, "--ignore-not-found")
    kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=60s")


def leftovers() -> list[str]:
    """What of a stopped Kueue still exists (nothing, after stop())."""
    found = [f"Kueue process {pid}" for pid in [_pid()] if pid is not None]
    return found + [str(p) for p in (state_dir(),) if p.exists()] + (
        [str(METRICS_CERTS.parent.parent)] if _ours_in_etc() else [])


def _owner_mark() -> Path:
    return METRICS_CERTS.parent.parent / ".tfhelm-local-kueue"  # /etc/kueue is this checkout's


def _ours_in_etc() -> bool:
    try:
        return _owner_mark().read_text() == str(state_dir())
    except OSError:
        return False
