"""The local Kubernetes used by the cluster tests and the demo.
(One module, over 400 lines: up() and down() must undo each other step by step, and
reading them side by side is how that stays true. The real nodes are in localnode.py.)

The real control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler) runs as local processes started by `kwokctl --runtime binary`,
beside up to three real nodes (tfhelm_dev.localnode) and kwok simulating more nodes and
their pods' lifecycle (see hack/testenv/). Every binary is one that `make testenv`
built; nothing is downloaded.

    tfhelm cluster up [--nodes N] [--real-nodes N] | down | status

Where things live:
  * binaries: $TFHELM_BIN_DIR, else <repo>/bin, else the build cache's bin/<version>/
              (where hack/cache-dir.sh says: ~/.cache/tfhelm unless told otherwise)
  * state:    $TFHELM_LOCAL_DIR (default <repo>/.tfhelm/local): `kubeconfig`, the
              kwokctl config, and kwokctl's work dir `kwok/` (etcd data, pki, logs).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tfhelm_dev import localnet, localnode
from tfhelm.errors import SpecError, TfhelmError

CLUSTER_NAME = "tfhelm"
REPO_ROOT = Path(__file__).resolve().parent.parent
# Node placement contract shared with charts/user-env (the "user node").
USER_NODE_LABEL, USER_NODE_TAINT = localnode.USER_NODE_LABEL, localnode.USER_NODE_TAINT
NODE_LABEL = "tfhelm.io/local-node"  # marks the kwok nodes this module manages
# With real nodes, kwok nodes carry kwok's own taint: only pods that ask for simulated
# nodes (tolerate it) land there; everything else runs for real.
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
# Namespace annotations that send a namespace's pods to the simulated nodes
# (admission plugins PodNodeSelector and PodTolerationRestriction).
SIMULATED_NAMESPACE_ANNOTATIONS = {
    "scheduler.alpha.kubernetes.io/node-selector": "type=kwok",
    "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps(
        [{"key": KWOK_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]),
}
STORAGE_CLASS = "standard"
# No Service may claim an external IP: kube-proxy would send that address's traffic, from
# every pod and node, to the Service's pods (CVE-2020-8554).
DENY_EXTERNAL_IPS = "DenyServiceExternalIPs"
# Kubernetes 1.36's alpha gang scheduling (docs/gang.md): the feature gates of the API server,
# controller manager and scheduler, and the alpha API the PodGroups are served by.
GANG_FEATURE_GATES = "GenericWorkload=true,GangScheduling=true"
GANG_RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"
# What `make testenv` puts in bin/ (and in the per-version cache).
BINARIES = ("kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager",
            "kube-scheduler", "kubectl", "kwok-stages.yaml", *localnode.NODE_BINARIES)


class LocalClusterError(TfhelmError):
    """The local cluster could not be started, reached or stopped."""


@dataclass
class ClusterInfo:
    name: str
    kubeconfig: Path
    server: str
    nodes: list[str] = field(default_factory=list)

    @property
    def export_line(self) -> str:
        return f"export KUBECONFIG={self.kubeconfig}"


# ---------------------------------------------------------------- locations

def local_dir() -> Path:
    """Where the kubeconfig and the kwokctl state live (ignored by git)."""
    return Path(os.environ.get("TFHELM_LOCAL_DIR") or REPO_ROOT / ".tfhelm" / "local").resolve()


def kubeconfig_path() -> Path:
    return local_dir() / "kubeconfig"


def _kwok_workdir() -> Path:
    return local_dir() / "kwok"


def _cluster_dir() -> Path:
    return _kwok_workdir() / "clusters" / CLUSTER_NAME


def _pinned_versions() -> list[str]:
    """The versions pinned in mk/versions.mk: they name the cache dirs."""
    versions = REPO_ROOT / "mk" / "versions.mk"
    if not versions.is_file():
        return []
    return [line.split(":=", 1)[1].strip() for line in versions.read_text().splitlines()
            if ":=" in line and not line.lstrip().startswith("#")]


def cache_dir() -> Path:
    """The per-user build cache shared by every clone, where hack/cache-dir.sh (the rule's
    one home, read by the Makefile and hack/ too) says it is."""
    script = REPO_ROOT / "hack" / "cache-dir.sh"
    if not script.is_file():
        raise LocalClusterError(f"no {script}: the local cluster runs from a source checkout")
    return Path(subprocess.run(["sh", str(script)], capture_output=True, text=True,
                               check=True).stdout.strip())


def images_archive() -> Path:
    """The local images, made by `make images` (hack/images/build.py): a Docker-format
    archive as a directory."""
    return cache_dir() / "images" / "archive"


def _nodes_dir() -> Path:
    return local_dir() / "nodes"


def real_nodes() -> list[localnode.Node]:
    """The real nodes the running local cluster was started with (none: kwok only)."""
    try:
        count = int(_mode_file().read_text())
    except (OSError, ValueError):
        return []
    return localnode.layout(count, _nodes_dir(), cache_dir() / "containerd-nodes") if count else []


def real_node(name: str) -> localnode.Node:
    found = [n for n in real_nodes() if n.name == name]
    if not found:
        raise LocalClusterError(f"no real node {name} in the local cluster")
    return found[0]


def bin_dir() -> Path:
    """The directory holding every binary in BINARIES (see module docstring)."""
    candidates = [Path(os.environ["TFHELM_BIN_DIR"])] if os.environ.get("TFHELM_BIN_DIR") else []
    candidates.append(REPO_ROOT / "bin")
    for d in candidates:
        if all((d / b).is_file() for b in BINARIES):
            return d.resolve()
    # Fall back to the per-version build cache (hack/cached-go-install.sh): the
    # binaries sit in one directory per version, so link them into one dir.
    cache = cache_dir()
    found = {}
    for v in _pinned_versions():
        for b in BINARIES:
            if b not in found and (cache / "bin" / v / b).is_file():
                found[b] = cache / "bin" / v / b
    if len(found) == len(BINARIES):
        linked = local_dir() / "bin"
        linked.mkdir(parents=True, exist_ok=True)
        for b, path in found.items():
            (linked / b).unlink(missing_ok=True)
            (linked / b).symlink_to(path)
        return linked
    raise LocalClusterError(
        f"missing local Kubernetes binaries (looked in {', '.join(map(str, candidates))} "
        f"and {cache / 'bin'}); run `make testenv`")


# ---------------------------------------------------------------- processes

def _env(bins: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{bins}{os.pathsep}{env.get('PATH', '')}"  # kwokctl looks up kubectl
    env["KWOK_WORKDIR"] = str(_kwok_workdir())
    env["KUBECONFIG"] = str(kubeconfig_path())
    return env


def _run(args: list[str], bins: Path, *, input: str | None = None, check: bool = True,
         timeout: float = 300) -> subprocess.CompletedProcess:
    # kwokctl forks the control plane; the children get their own log files and
    # no pipe of ours, so capturing output here cannot hang on them.
    proc = subprocess.run(args, env=_env(bins), input=input, capture_output=True, text=True,
                          timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)
    if check and proc.returncode != 0:
        cmd = " ".join([Path(args[0]).name, *args[1:]])
        raise LocalClusterError(f"{cmd} failed:\n{proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def _kubectl(bins: Path, *args: str, input: str | None = None, check: bool = True,
             timeout: float = 60) -> subprocess.CompletedProcess:
    return _run([str(bins / "kubectl"), "--kubeconfig", str(kubeconfig_path()), *args], bins,
                input=input, check=check, timeout=timeout)


def _pids() -> list[int]:
    pids = []
    for f in (_cluster_dir() / "pids").glob("*.pid"):
        try:
            pids.append(int(f.read_text().strip()))
        except (OSError, ValueError):
            pass
    return pids


def _is_ours(pid: int) -> bool:
    """True if pid is alive and runs from our cluster dir (pids can be reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and str(_cluster_dir()) in cmdline


# ---------------------------------------------------------------- cluster objects

def _kwokctl_config(bins: Path, real: int) -> str:
    options = {
        "runtime": "binary",
        "bindAddress": "127.0.0.1",
        "securePort": True,
        "kubeAuthorization": True,  # --authorization-mode=Node,RBAC
        "kubeAdmission": True,      # default admission plugins, PodSecurity included
        "quietPull": True,
        "cacheDir": str(_kwok_workdir() / "cache"),
        "kwokControllerBinary": str(bins / "kwok"),
        "etcdBinary": str(bins / "etcd"),
        "kubeApiserverBinary": str(bins / "kube-apiserver"),
        "kubeControllerManagerBinary": str(bins / "kube-controller-manager"),
        "kubeSchedulerBinary": str(bins / "kube-scheduler"),
        "kubectlBinary": str(bins / "kubectl"),
        # Kubernetes' alpha gang scheduling (tf-cluster `gang.enabled`, docs/gang.md): kwokctl
        # passes the gates to kube-apiserver, kube-controller-manager (the PodGroup protection
        # controller removes the finalizer the API server puts on every PodGroup) and
        # kube-scheduler (the GangScheduling plugin), and serves the PodGroup API. Additive: a
        # pod that names no PodGroup is scheduled as before; WorkloadWithJob stays off, so the
        # Job controller makes no PodGroup of its own for any Job.
        "kubeFeatureGates": GANG_FEATURE_GATES,
        "kubeRuntimeConfig": GANG_RUNTIME_CONFIG,
    }
    config = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": options,
        # PersistentVolumes: kwok does not provision volumes, so we enable the real
        # in-tree hostPath provisioner of the PV controller (meant for single-host
        # test clusters, as hack/local-up-cluster.sh does). Claims of the default
        # StorageClass `standard` are then provisioned (an empty directory under
        # /tmp/hostpath_pv/) and bound by the real controller, for any size or
        # access mode, and deleted again with their claim.
        "componentsPatches": [{
            "name": "kube-controller-manager",
            "extraArgs": [{"key": "enable-hostpath-provisioner", "value": "true"}],
        }],
    }
    if real:
        # kwok's default (5) multiplies the node heartbeats and the controller-manager's
        # grace period by 5 (200 s before a silent node is NotReady); 1 is the kubelet's own
        # timing: a lost real node is NotReady 40 s after its last heartbeat.
        options["heartbeatFactor"] = 1
        options["kubeApiserverCertSANs"] = [localnet.HOST_IP, localnode.KUBERNETES_SERVICE_IP]
        pki = _cluster_dir() / "pki"
        apiserver = {
            # Also on the host's bridge to the nodes: kubelets, kube-proxies, CoreDNS and
            # pods (through the `kubernetes` Service) reach the API server there.
            "bind-address": "0.0.0.0",
            "advertise-address": localnet.HOST_IP,
            "service-cluster-ip-range": localnode.SERVICE_CIDR,
            "kubelet-preferred-address-types": "InternalIP",
            "kubelet-client-certificate": str(pki / "admin.crt"),
            "kubelet-client-key": str(pki / "admin.key"),
            "enable-admission-plugins": f"PodNodeSelector,PodTolerationRestriction,{DENY_EXTERNAL_IPS}",
        }
        kwok = {  # kwok must leave the real nodes alone
            "manage-all-nodes": "false",
            "manage-nodes-with-annotation-selector": "kwok.x-k8s.io/node=fake",
        }
        config["componentsPatches"] += [
            {"name": "kube-apiserver", "extraArgs": [{"key": k, "value": v} for k, v in apiserver.items()]},
            {"name": "kwok-controller", "extraArgs": [{"key": k, "value": v} for k, v in kwok.items()]},
        ]
    else:
        config["componentsPatches"].append({"name": "kube-apiserver", "extraArgs": [
            {"key": "enable-admission-plugins", "value": DENY_EXTERNAL_IPS}]})
    return yaml.safe_dump(config, sort_keys=False)


def _node(name: str, *, user: bool = False, gpus: int = 0, real: int = 0) -> dict:
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "type": "kwok", NODE_LABEL: "true",
    }
    taints = [KWOK_TAINT] if real else []
    if user:
        labels[USER_NODE_LABEL[0]] = USER_NODE_LABEL[1]
        labels["node-role.kubernetes.io/user"] = ""
        taints.append(USER_NODE_TAINT)
    resources = {"cpu": "32", "memory": "256Gi", "pods": "250", "ephemeral-storage": "1Ti"}
    if gpus:
        labels["nvidia.com/gpu.present"] = "true"
        resources["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": taints},
        # Nodes may set status on create; kwok keeps allocatable/capacity.
        "status": {"allocatable": resources, "capacity": resources},
    }


def node_names(nodes: int) -> list[str]:
    return [f"{CLUSTER_NAME}-worker-{i}" for i in range(nodes - 1)] + [f"{CLUSTER_NAME}-user"]


def _objects(nodes: int, real: int) -> list[dict]:
    names = node_names(nodes)
    objs = [_node(n, gpus=8 if i == 0 else 0, real=real) for i, n in enumerate(names[:-1])]
    objs.append(_node(names[-1], user=True, real=real))
    objs.append({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS,
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/host-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    })
    return objs


def _apply_objects(bins: Path, nodes: int, real: int) -> None:
    _kubectl(bins, "apply", "-f", "-", input=yaml.safe_dump_all(_objects(nodes, real)))
    # Drop nodes of an earlier `up` with a larger --nodes.
    current = _kubectl(bins, "get", "nodes", "-l", NODE_LABEL, "-o", "name").stdout.split()
    stale = [n for n in current if n.removeprefix("node/") not in node_names(nodes)]
    if stale:
        _kubectl(bins, "delete", "--wait=false", *stale)
    _kubectl(bins, "wait", "--for=condition=Ready", "node", "-l", NODE_LABEL, "--timeout=120s",
             timeout=130)


def _wait_schedulable(bins: Path, selector: str, timeout: float = 60) -> None:
    """Until the node lifecycle controller lifted the `node.kubernetes.io/not-ready` (and
    similar) taints it puts on new nodes: Ready alone comes a moment earlier."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = json.loads(_kubectl(bins, "get", "nodes", "-l", selector, "-o", "json").stdout)["items"]
        pending = [n["metadata"]["name"] for n in nodes
                   if any(t["key"].startswith("node.kubernetes.io/") for t in n["spec"].get("taints", []))]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise LocalClusterError(f"nodes still tainted not-ready after {timeout:.0f}s: {pending}")
        time.sleep(0.5)


# ---------------------------------------------------------------- API

def status() -> ClusterInfo | None:
    """The running local cluster, or None if it is not up and answering."""
    kubeconfig = kubeconfig_path()
    if not kubeconfig.is_file() or not _cluster_dir().is_dir():
        return None
    try:
        bins = bin_dir()
        _kubectl(bins, "get", "--raw", "/readyz", timeout=10)
        nodes = _kubectl(bins, "get", "nodes", "-o", "name", timeout=10).stdout.split()
    except (LocalClusterError, subprocess.TimeoutExpired):
        return None
    config = yaml.safe_load(kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    return ClusterInfo(CLUSTER_NAME, kubeconfig, server, [n.removeprefix("node/") for n in nodes])


def _mode_file() -> Path:
    return local_dir() / "real-nodes"  # how many real nodes the running cluster has


def up(nodes: int = 3, real: int = localnode.MAX_NODES) -> ClusterInfo:
    """Start the local cluster (idempotent): `real` real nodes (0 to 3, see
    tfhelm_dev.localnode: the user node, then training nodes) and `nodes` simulated kwok nodes.

    nodes-1 plain kwok workers (the first advertises nvidia.com/gpu: 8) and one user
    node labelled tfhelm.io/node-role=user and tainted tfhelm.io/user-node=true. With
    real nodes, kwok nodes are tainted (KWOK_TAINT): pods run for real unless their
    namespace asks for simulated nodes (SIMULATED_NAMESPACE_ANNOTATIONS).
    """
    if nodes < 2:
        raise SpecError("nodes", f"{nodes} is too few", "use at least 2: a worker and the user node")
    if not 0 <= real <= localnode.MAX_NODES:
        raise SpecError("--real-nodes", f"{real} is not between 0 and {localnode.MAX_NODES}",
                        "use 3 (the user node and two training nodes), 2, 1 (one node runs everything) or 0 (kwok only)")
    bins = bin_dir()
    if real and not (images_archive() / "manifest.json").is_file():
        raise LocalClusterError(f"no local images at {images_archive()}; run `make images`")
    running = status()
    if running is not None and (len(real_nodes()) != real
                                or not all(localnode.running(n) for n in real_nodes())):
        down()  # started with other nodes, or one of its nodes died: start over
        running = None
    if running is None:
        if _cluster_dir().is_dir() or any(localnode.running(n) for n in real_nodes()):
            # Left from an earlier run (e.g. killed processes, a reboot): the
            # local cluster holds nothing worth keeping, so start over.
            down()
        local_dir().mkdir(parents=True, exist_ok=True)
        config = local_dir() / "kwokctl.yaml"
        config.write_text(_kwokctl_config(bins, real))
        _run([str(bins / "kwokctl"), "--name", CLUSTER_NAME,
              "--config", str(bins / "kwok-stages.yaml"), "--config", str(config),
              "create", "cluster", "--runtime", "binary",
              "--kubeconfig", str(kubeconfig_path()), "--wait", "2m"], bins, timeout=240)
        _kubectl(bins, "config", "use-context", f"kwok-{CLUSTER_NAME}")
        if real:
            _start_real_nodes(bins, real)
    _apply_objects(bins, nodes, real)
    _wait_schedulable(bins, NODE_LABEL)
    if real:
        selector = "=".join(localnode.REAL_NODE_LABEL)
        _kubectl(bins, "wait", "--for=condition=Ready", "node", "-l", selector, "--timeout=120s", timeout=130)
        _wait_schedulable(bins, selector)
    info = status()
    if info is None:
        raise LocalClusterError(f"local cluster did not come up; logs in {_cluster_dir() / 'logs'}")
    return info


def _start_real_nodes(bins: Path, count: int) -> None:
    server = yaml.safe_load(kubeconfig_path().read_text())["clusters"][0]["cluster"]["server"]
    _mode_file().write_text(str(count))
    cluster = localnode.Cluster(
        bins=bins, apiserver_port=int(server.rsplit(":", 1)[1]), pki=_cluster_dir() / "pki",
        images=images_archive(), template=cache_dir() / "containerd-images",
        kubectl=lambda *args, check=True: _kubectl(bins, *args, check=check))
    try:
        localnode.start_all(real_nodes(), cluster, _nodes_dir())
        user = [n.name for n in real_nodes() if n.user]
        # The kubelet may not set node-role.kubernetes.io/* labels itself.
        _kubectl(bins, "label", "--overwrite", "node", *user, "node-role.kubernetes.io/user=")
    except localnode.ERRORS as e:
        raise LocalClusterError(str(e)) from e


def restart_apiserver(down_for: float = 3.0, timeout: float = 120) -> float:
    """SIGKILL kube-apiserver and start it again with the same command line, as a crash and a
    supervisor's restart would (kwokctl runs it from a pid file in the cluster's directory);
    returns once it is ready again, the seconds it was away. For the tests and the chaos bench."""
    pid_file = _cluster_dir() / "pids" / "kube-apiserver.pid"
    pid = int(pid_file.read_text().strip())
    proc = Path(f"/proc/{pid}")
    argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0")[:-1]]
    env = dict(kv.decode().split("=", 1) for kv in (proc / "environ").read_bytes().split(b"\0") if b"=" in kv)
    cwd = os.readlink(proc / "cwd")
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    while proc.exists() and "Z" not in (proc / "stat").read_text().rsplit(")", 1)[1][:3]:
        time.sleep(0.1)
    time.sleep(down_for)  # clients' watches break and their reconnects are refused meanwhile
    with open(_cluster_dir() / "logs" / "kube-apiserver.log", "ab") as log:
        new = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                               start_new_session=True)
    pid_file.write_text(str(new.pid))
    bins = bin_dir()
    while _kubectl(bins, "get", "--raw", "/readyz", check=False, timeout=10).returncode != 0:
        if time.monotonic() - t0 > timeout:
            raise LocalClusterError(f"kube-apiserver not ready {timeout:.0f}s after its restart")
        time.sleep(0.2)
    return time.monotonic() - t0


def _remove_provisioned_volumes(bins: Path) -> None:
    """Delete the directories the hostPath provisioner made for this cluster's PVs."""
    try:
        out = _kubectl(bins, "get", "pv", "-o", "jsonpath={.items[*].spec.hostPath.path}",
                       timeout=10).stdout
    except (LocalClusterError, subprocess.TimeoutExpired):
        return  # not reachable: nothing to learn the paths from
    for path in out.split():
        if path.startswith("/tmp/hostpath_pv/"):
            shutil.rmtree(path, ignore_errors=True)


def down() -> None:
    """Stop the local cluster and remove its state; no process, port, mount, network
    namespace or cgroup is left."""
    from tfhelm_dev import localkueue  # it runs beside the control plane: it goes first

    localkueue.stop(cluster=False)
    pids = _pids()
    if _cluster_dir().is_dir():
        try:
            bins = bin_dir()
            _remove_provisioned_volumes(bins)
            _run([str(bins / "kwokctl"), "--name", CLUSTER_NAME, "delete", "cluster",
                  "--kubeconfig", str(kubeconfig_path())], bins, check=False, timeout=120)
        except LocalClusterError:
            pass  # no binaries: fall through to killing by pid
    try:
        localnode.stop_all(_nodes_dir())
    except localnode.ERRORS as e:
        raise LocalClusterError(str(e)) from e
    _mode_file().unlink(missing_ok=True)
    # kwokctl SIGKILLs what its pid files name; make sure nothing survived.
    for pid in pids:
        if _is_ours(pid):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_is_ours(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    shutil.rmtree(_kwok_workdir(), ignore_errors=True)
    shutil.rmtree(local_dir() / "bin", ignore_errors=True)
    for f in (kubeconfig_path(), local_dir() / "kwokctl.yaml"):
        f.unlink(missing_ok=True)


def leftovers() -> list[str]:
    """What of a stopped local cluster still exists (nothing, after down())."""
    from tfhelm_dev import localkueue

    found = localnode.leftovers(_nodes_dir()) + localkueue.leftovers()
    found += [f"process {p.name}" for p in Path("/proc").iterdir() if p.name.isdigit() and _is_ours(int(p.name))]
    return found + [str(f) for f in (kubeconfig_path(), _kwok_workdir(), _mode_file()) if f.exists()]
