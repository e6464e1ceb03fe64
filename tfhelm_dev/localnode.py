"""The local cluster's real nodes: pods that really run, on up to three machines' worth of nodes.
(One module, over 400 lines: start_all() and stop_all() mirror each other - namespaces, mounts,
cgroups, processes - and stay correct only when read together.)

Each node is what a machine runs: kubelet and kube-proxy (the pinned Kubernetes), containerd 2
with Debian's runc and CNI plugins (bridge, host-local, portmap), CoreDNS, and kube-router's
network policy controller enforcing NetworkPolicy (iptables and ipsets; its routing and
service proxy are off). A node's processes live in a network namespace of its own (see
localnet.py: the nodes share a bridge on the host and route each other's pod ranges), a
private mount namespace (their /run, /var/lib and /var/log are the node's own) and a cgroup of
their own (`/<node>/daemons`, beside the kubelet's `/<node>/kubepods`), which is what lets
lose() freeze a whole node at once. Images come from localimages.py; nothing is pulled.
stop_all() leaves no process, mount, namespace, interface, route or cgroup behind.

The layout (layout()): `tfhelm-node-user`, the user node (label tfhelm.io/node-role=user,
taint tfhelm.io/user-node=true:NoSchedule: workspaces run there, training pods never do), and
the training nodes `tfhelm-node-train1`, `tfhelm-node-train2`. A single node is the user node
without the taint, so it runs everything.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from tfhelm_dev import localimages, localnet
from tfhelm.errors import TfhelmError
from tfhelm_dev.localnet import HOST_IP, NodeNet

USER_NODE, TRAINING_NODES = "tfhelm-node-user", ("tfhelm-node-train1", "tfhelm-node-train2")
MAX_NODES = 1 + len(TRAINING_NODES)
# Node placement contract shared with charts/user-env (the "user node").
USER_NODE_LABEL = ("tfhelm.io/node-role", "user")
USER_NODE_TAINT = {"key": "tfhelm.io/user-node", "value": "true", "effect": "NoSchedule"}
ROLE_LABEL = USER_NODE_LABEL[0]
REAL_NODE_LABEL = ("tfhelm.io/real-node", "true")
SERVICE_CIDR, KUBERNETES_SERVICE_IP = "10.96.0.0/16", "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"
SANDBOX_IMAGE = "tfhelm/pause:local"
# What the nodes need on the host besides the binaries `make node` builds.
HOST_TOOLS = ("runc", "iptables", "ip", "nsenter", "unshare", "mount", "conntrack", "bindfs", "ipset", "cp")
# Where kube-controller-manager's host-path provisioner makes volumes (fixed in Kubernetes).
HOSTPATH_PV = Path("/tmp/hostpath_pv")
CNI_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
NODE_BINARIES = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "coredns",
                 "kube-router")
CGROUP_ROOT = Path("/sys/fs/cgroup")
DAEMONS = "daemons"  # the node's own processes, in /<node>/daemons


# The namespace, cgroup and interface names are machine-wide: one local cluster's nodes per
# machine. This file names the state directory of the clone that runs them, so another
# clone's `down` never stops them.
OWNER_FILE = Path("/run/tfhelm-node.owner")


class LocalNodeError(TfhelmError):
    """A real node could not be started or stopped."""


ERRORS = (LocalNodeError, localnet.LocalNetError, localimages.LocalImagesError)  # what starting and stopping raise


@dataclass(frozen=True)
class Node:
    net: NodeNet
    user: bool       # the user node (workspaces); tainted unless it is the only node
    training: bool   # training pods run here
    state: Path      # per run: configs, logs, kubelet and CNI state (removed by stop_all)
    store: Path      # containerd's root, kept across runs (a copy of the image template)

    @property
    def name(self) -> str:
        return self.net.name

    @property
    def labels(self) -> dict[str, str]:
        return {REAL_NODE_LABEL[0]: REAL_NODE_LABEL[1], ROLE_LABEL: "user" if self.user else "training"}

    @property
    def taints(self) -> list[dict]:
        return [USER_NODE_TAINT] if self.user and not self.training else []

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def pids(self) -> Path:
        return self.state / "pids"

    @property
    def socket(self) -> Path:
        return self.state / "run" / "containerd.sock"


@dataclass(frozen=True)
class Cluster:
    """What the nodes need of the control plane and the build."""

    bins: Path
    apiserver_port: int
    pki: Path
    images: Path       # the archive of hack/images/build.py
    template: Path     # the image store every node's store copies
    kubectl: Callable  # kubectl(*args, check=True) against the cluster, from the host


def layout(count: int, state_root: Path, store_root: Path) -> list[Node]:
    """The nodes of a cluster with `count` real nodes (1 to MAX_NODES)."""
    if not 1 <= count <= MAX_NODES:
        raise LocalNodeError(f"{count} real nodes: the local cluster runs 1 to {MAX_NODES}")
    names = [USER_NODE, *TRAINING_NODES[:count - 1]]
    return [Node(NodeNet(name, i), user=i == 0, training=i > 0 or count == 1,
                 state=state_root / name, store=store_root / name) for i, name in enumerate(names)]


# ---------------------------------------------------------------- helpers

def _sh(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise LocalNodeError(f"{' '.join(args)}: {(proc.stderr or proc.stdout).strip()}")
    return proc


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def missing_host_tools() -> list[str]:
    missing = [t for t in HOST_TOOLS if shutil.which(t) is None]
    if not any((d / "bridge").is_file() for d in CNI_DIRS):
        missing.append("CNI plugins (bridge, host-local, loopback, portmap)")
    return missing


def _wait_for(check, timeout: float, what: str, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            hint = f"; see {log}" if log else ""
            raise LocalNodeError(f"timed out after {timeout:.0f}s waiting for {what}{hint}")
        time.sleep(0.2)


# ---------------------------------------------------------------- volumes

def _mount_volumes(backing: Path) -> None:
    """The host-path provisioner makes root-owned 0750 directories, which pods running as
    a non-root user cannot write (the kubelet applies no fsGroup to host paths). Serve
    them through bindfs, writable by every user and files owned by their creator, as
    kind's local-path volumes (0777) are. Every node sees the same directories, as nodes
    see a network filesystem."""
    backing.mkdir(parents=True, exist_ok=True)
    _release_dead_mount(HOSTPATH_PV)
    HOSTPATH_PV.mkdir(parents=True, exist_ok=True)
    # nonempty: kwok-only clusters of other clones may have made (unused) directories there.
    _sh("bindfs", "-o", "allow_other,nonempty", "--perms=a+rwX", str(backing), str(HOSTPATH_PV))


def _release_dead_mount(path: Path) -> None:
    """A cluster killed with its machine (or its bindfs) leaves the mount behind with no FUSE
    server: every access then fails with "Transport endpoint is not connected". Detach it."""
    try:
        path.stat()
    except FileNotFoundError:
        return  # a fresh machine: nothing mounted there yet
    except OSError as e:
        if e.errno != errno.ENOTCONN:
            raise
        _sh("umount", "-l", str(path))


def _unmount_volumes(backing: Path) -> None:
    while _sh("mountpoint", "-q", str(HOSTPATH_PV), check=False).returncode == 0:
        _sh("umount", str(HOSTPATH_PV), check=False)
    # bindfs, the FUSE server, exits a moment after the unmount: gone before we return.
    _wait_for(lambda: not any(str(backing) in _cmdline(p) for p in Path("/proc").iterdir() if p.name.isdigit()),
              10, "bindfs to exit after the unmount")


# ---------------------------------------------------------------- cgroups

def _v2() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").is_file()


def _cgroup_dirs(name: str) -> list[Path]:
    """A node's cgroup in every hierarchy (cgroup v1: one per controller)."""
    if _v2():
        return [CGROUP_ROOT / name]
    return [d / name for d in CGROUP_ROOT.iterdir()
            if d.is_dir() and not d.is_symlink() and (d / "cgroup.procs").is_file()]


def _make_cgroups(name: str) -> None:
    v2 = _v2()
    if v2:  # the controllers the kubelet needs, delegated down to the node's cgroup
        wanted = set((CGROUP_ROOT / "cgroup.controllers").read_text().split()) & {"cpu", "cpuset", "memory", "pids", "io"}
        enable = " ".join(f"+{c}" for c in sorted(wanted))
        (CGROUP_ROOT / "cgroup.subtree_control").write_text(enable)
    for d in _cgroup_dirs(name):
        for sub in (d, d / DAEMONS):
            sub.mkdir(exist_ok=True)
            if d.parent.name == "cpuset":  # v1 cpuset children start empty: inherit the parent's
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (sub / f).write_text((sub.parent / f).read_text())
    if v2:
        (CGROUP_ROOT / name / "cgroup.subtree_control").write_text(enable)


def _subtree(d: Path) -> list[Path]:
    """A cgroup and every cgroup under it, parents first. os.walk, not Path.rglob: the kubelet
    removes pod cgroups while we walk, and rglob fails on a directory that went away."""
    return [Path(top) for top, _, _ in os.walk(d)]


def _cgroup_pids(name: str) -> set[int]:
    pids: set[int] = set()
    for d in _cgroup_dirs(name):
        for sub in _subtree(d):
            try:
                pids.update(int(p) for p in (sub / "cgroup.procs").read_text().split())
            except OSError:
                pass
    return pids


def _remove_cgroups(name: str) -> None:
    for d in _cgroup_dirs(name):
        for sub in reversed(_subtree(d)):  # children before their parents
            sub.rmdir()


def _freezer(name: str) -> Path:
    return CGROUP_ROOT / name / "cgroup.freeze" if _v2() else CGROUP_ROOT / "freezer" / name / "freezer.state"


def _set_frozen(name: str, frozen: bool) -> None:
    f = _freezer(name)
    if not f.exists():
        return
    if _v2():
        f.write_text("1" if frozen else "0")
        events = f.with_name("cgroup.events")
        _wait_for(lambda: f"frozen {int(frozen)}" in events.read_text(), 30, f"cgroup {name} frozen={frozen}")
    else:
        f.write_text("FROZEN" if frozen else "THAWED")
        _wait_for(lambda: f.read_text().strip() == ("FROZEN" if frozen else "THAWED"), 30,
                  f"cgroup {name} {'frozen' if frozen else 'thawed'}")


def daemon_pids(node: Node) -> list[int]:
    """The node's own processes (kubelet, containerd and its shims, kube-proxy, CoreDNS,
    kube-router), not its pods'."""
    procs = (CGROUP_ROOT if _v2() else CGROUP_ROOT / "memory") / node.name / DAEMONS / "cgroup.procs"
    try:
        return [int(p) for p in procs.read_text().split()]
    except OSError:
        return []


# ---------------------------------------------------------------- configs

def _kubeconfig(server: str, pki: Path) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "tfhelm",
        "clusters": [{"name": "tfhelm", "cluster": {"server": server,
                                                      "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": "tfhelm", "user": {"client-certificate": str(pki / "admin.crt"),
                                                "client-key": str(pki / "admin.key")}}],
        "contexts": [{"name": "tfhelm", "context": {"cluster": "tfhelm", "user": "tfhelm"}}],
    })


def containerd_config(root: str, state: str, socket: str, cni_conf_dir: str) -> str:
    return f"""version = 3
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{SANDBOX_IMAGE}"
[plugins.'io.containerd.cri.v1.runtime']
  # root here lacks CAP_SYS_RESOURCE: never lower a process's OOM score below ours
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [{", ".join(f'"{d}"' for d in CNI_DIRS)}]
  conf_dir = "{cni_conf_dir}"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{shutil.which('runc')}"
  SystemdCgroup = false
"""


def _cni_config(node: Node) -> str:
    return json.dumps({
        "cniVersion": "1.0.0", "name": "tfhelm",
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": node.net.pod_cidr, "gateway": node.net.pod_gateway}]],
                      "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(node.state / "cni" / "ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }, indent=1)


def _kubelet_config(node: Node, pki: Path) -> str:
    return yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": node.net.ip, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(pki / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{node.name}", "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        # Each node's own CoreDNS, as NodeLocal DNSCache serves a node's pods.
        "clusterDNS": [node.net.ip], "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(node.state / "resolv.conf"),
        "podLogsDir": str(node.state / "pods-logs"),
        "registerWithTaints": node.taints,  # tainted from its first moment: nothing slips on
        "evictionHard": {"memory.available": "200Mi", "nodefs.available": "2%",
                         "imagefs.available": "2%", "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 99, "imageGCLowThresholdPercent": 98,
        "serializeImagePulls": False, "maxPods": 110,
        "enforceNodeAllocatable": ["pods"],
        "shutdownGracePeriod": "0s",
    })


def _kube_proxy_config(node: Node, kubeconfig: Path) -> str:
    return yaml.safe_dump({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node.name, "mode": "iptables", "clusterCIDR": str(localnet.POD_NETWORK),
        "nodePortAddresses": [f"{node.net.ip}/32"],
        "metricsBindAddress": "127.0.0.1:10249", "healthzBindAddress": "127.0.0.1:10256",
        # The node's network namespace cannot change the machine's conntrack table size.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    })


def _corefile(kubeconfig: Path) -> str:
    # Cluster names only: there is no upstream resolver, nothing leaves the machine.
    return f""".:53 {{
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} tfhelm
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
    loadbalance
}}
"""


# ---------------------------------------------------------------- processes

# Joins the node's daemons cgroup (every hierarchy), then becomes the command: whatever it
# starts (containerd's shims) is in the node's cgroup from its first instruction.
_JOIN_CGROUP = 'for f in $TFHELM_NODE_CGROUPS; do echo $$ > "$f"; done; exec "$@"'


def _spawn(node: Node, name: str, args: list[str], holder: int | None, env: dict | None = None) -> int:
    node.logs.mkdir(parents=True, exist_ok=True)
    node.pids.mkdir(parents=True, exist_ok=True)
    enter = ["nsenter", f"--target={holder}", "--mount", "--net", "--"] if holder else []
    procs = " ".join(str(d / DAEMONS / "cgroup.procs") for d in _cgroup_dirs(node.name))
    with open(node.logs / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(["/bin/sh", "-c", _JOIN_CGROUP, "sh", *enter, *args],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=dict(env or os.environ, TFHELM_NODE_CGROUPS=procs))
    (node.pids / f"{name}.pid").write_text(str(proc.pid))
    return proc.pid


def _start_holder(node: Node) -> int:
    """A process that owns the node's mount namespace: tmpfs /run, the node's /var/lib
    and /var/log. Every node process enters it (and the network namespace)."""
    for d in ("var-lib", "var-log", "run", "cni/net.d", "pods-logs"):
        (node.state / d).mkdir(parents=True, exist_ok=True)
    script = (f"mount -t tmpfs -o mode=0755 tmpfs /run && mount --bind {node.state / 'var-lib'} /var/lib && "
              f"mount --bind {node.state / 'var-log'} /var/log && mkdir -p /run/netns && exec sleep infinity")
    pid = _spawn(node, "holder", ["nsenter", f"--net={node.net.netns}", "--", "unshare", "--mount",
                                  "--propagation", "private", "--", "/bin/sh", "-c", script], None)
    # sh, nsenter, unshare and sh each exec the next: the pid stays, and once it runs
    # `sleep` the mounts are in place.
    _wait_for(lambda: _comm(pid) == "sleep", 10, f"{node.name}'s namespaces", node.logs / "holder.log")
    return pid


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _holder(state: Path) -> int | None:
    """The pid of the holder of the node with that state directory, if it runs."""
    try:
        pid = int((state / "pids" / "holder.pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if _comm(pid) == "sleep" else None  # else: gone, or the pid reused


def _ctr(node: Node, bins: Path, holder: int, *args: str, **kw) -> subprocess.CompletedProcess:
    return _sh("nsenter", f"--target={holder}", "--mount", "--net", "--",
               str(bins / "ctr"), "--address", str(node.socket), "-n", "k8s.io", *args, **kw)


# ---------------------------------------------------------------- one node

def running(node: Node) -> bool:
    holder = _holder(node.state)
    return bool(holder and node.net.netns.exists() and _inode(f"/proc/{holder}/ns/mnt"))


def _start(node: Node, c: Cluster) -> None:
    """Start one node (its network is up); returns once it registered."""
    node.state.mkdir(parents=True, exist_ok=True)
    _make_cgroups(node.name)
    kubeconfig = node.state / "kubeconfig"
    kubeconfig.write_text(_kubeconfig(f"https://{HOST_IP}:{c.apiserver_port}", c.pki))
    (node.state / "containerd.toml").write_text(containerd_config(
        str(node.store), str(node.state / "run" / "containerd-state"), str(node.socket), str(node.state / "cni" / "net.d")))
    (node.state / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
    (node.state / "cni" / "net.d" / "10-tfhelm.conflist").write_text(_cni_config(node))
    (node.state / "kubelet.yaml").write_text(_kubelet_config(node, c.pki))
    (node.state / "kube-proxy.yaml").write_text(_kube_proxy_config(node, kubeconfig))
    (node.state / "Corefile").write_text(_corefile(kubeconfig))
    (node.state / "resolv.conf").write_text("")  # no upstream resolver for pods
    copied = localimages.node_store(c.template, node.store)
    holder = _start_holder(node)
    # containerd finds its shim on PATH: ours first, never an older one of the host.
    env = dict(os.environ, PATH=f"{c.bins}:{os.environ.get('PATH', '')}")
    _spawn(node, "containerd", [str(c.bins / "containerd"), "--config", str(node.state / "containerd.toml")], holder, env)
    _wait_for(node.socket.exists, 30, f"{node.name}'s containerd socket", node.logs / "containerd.log")
    if not copied:  # containers of an earlier run are gone with its processes: forget them
        stale = _ctr(node, c.bins, holder, "containers", "ls", "-q", check=False).stdout.split()
        if stale:
            _ctr(node, c.bins, holder, "containers", "rm", *stale, check=False)
    _spawn(node, "coredns", [str(c.bins / "coredns"), "-conf", str(node.state / "Corefile")], holder)
    _spawn(node, "kube-proxy", [str(c.bins / "kube-proxy"), "--config", str(node.state / "kube-proxy.yaml")], holder, env)
    labels = ",".join(f"{k}={v}" for k, v in node.labels.items())
    _spawn(node, "kubelet", [str(c.bins / "kubelet"), "--config", str(node.state / "kubelet.yaml"),
                             "--kubeconfig", str(kubeconfig), "--hostname-override", node.name,
                             "--node-ip", node.net.ip, "--node-labels", labels,
                             "--cert-dir", str(node.state / "kubelet-pki")], holder, env)
    _wait_for(lambda: c.kubectl("get", "node", node.name, check=False).returncode == 0, 90,
              f"node {node.name} to register", node.logs / "kubelet.log")
    # NetworkPolicy enforcement only (it needs the Node object): the bridge CNI and the
    # routes carry pod traffic, kube-proxy serves Services.
    _spawn(node, "kube-router", [str(c.bins / "kube-router"), "--kubeconfig", str(kubeconfig),
                                 "--hostname-override", node.name, "--run-firewall=true", "--run-router=false",
                                 "--run-service-proxy=false", "--enable-cni=false", "--health-port=0",
                                 "--iptables-sync-period=30s"], holder, env)


def lose(node: Node) -> None:
    """The node is lost, as a machine that hangs: its cable is cut and every process on it
    (kubelet, containerd, its pods) is frozen. restore() brings it back as it was."""
    localnet.unplug(node.net)
    _set_frozen(node.name, True)


def restore(node: Node) -> None:
    _set_frozen(node.name, False)
    localnet.plug(node.net)


# ---------------------------------------------------------------- every node

def _owner() -> str | None:
    try:
        return OWNER_FILE.read_text().strip() or None
    except OSError:
        return None


def _state_dirs(state_root: Path) -> list[Path]:
    return sorted(d for d in state_root.iterdir() if d.is_dir()) if state_root.is_dir() else []


def _alive(state_root: Path) -> bool:
    """True if a node of that state directory still runs."""
    return any(_holder(d) for d in _state_dirs(state_root))


def start_all(nodes: list[Node], c: Cluster, state_root: Path) -> None:
    """Start the nodes (in parallel); returns once every one registered (Ready is the
    caller's wait)."""
    missing = missing_host_tools()
    if missing:
        raise LocalNodeError(f"the real nodes need {', '.join(missing)} on the host; run `make node`")
    if os.geteuid() != 0:
        raise LocalNodeError("the real nodes need root (network namespaces, mounts, cgroups)")
    owner = _owner()
    if owner and owner != str(state_root) and _alive(Path(owner)):
        raise LocalNodeError(f"the machine's real nodes belong to the local cluster of {owner}; "
                             "stop that one first (`tfhelm cluster down` there)")
    OWNER_FILE.unlink(missing_ok=True)  # a stale claim (its processes are gone): ours now
    stop_all(state_root)
    state_root.mkdir(parents=True, exist_ok=True)
    OWNER_FILE.write_text(str(state_root))
    localnet.setup([n.net for n in nodes])
    _mount_volumes(state_root / "volumes")  # before the nodes' mount namespaces copy the host's
    localimages.prepare_template(c.template, c.images, c.bins, containerd_config("ROOT", "STATE", "SOCKET", "/nonexistent"))
    with ThreadPoolExecutor(len(nodes)) as pool:
        for future in [pool.submit(_start, n, c) for n in nodes]:
            future.result()


def _pids(names: list[str], state_root: Path) -> set[int]:
    """Every process of these nodes: in their network or mount namespaces, or their cgroups."""
    spaces = {i for n in names if (i := _inode(str(localnet.NETNS_DIR / n)))}
    spaces |= {i for d in _state_dirs(state_root) if (pid := _holder(d)) and (i := _inode(f"/proc/{pid}/ns/mnt"))}
    found = set().union(*(_cgroup_pids(n) for n in names)) if names else set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        if {_inode(f"{proc}/ns/mnt"), _inode(f"{proc}/ns/net")} & spaces:
            found.add(int(proc.name))
    return found


def _node_names() -> list[str]:
    """Every node of this layout that has a namespace or a cgroup now (any earlier run's)."""
    names = {n for n in localnet.leftovers() if n.startswith(localnet.NETNS_PREFIX)}
    hierarchy = CGROUP_ROOT if _v2() else CGROUP_ROOT / "freezer"
    if hierarchy.is_dir():
        names |= {d.name for d in hierarchy.iterdir() if d.is_dir() and d.name.startswith(localnet.NETNS_PREFIX)}
    return sorted(names)


def leftovers(state_root: Path) -> list[str]:
    """What of the nodes exists now: for stop_all() to leave nothing, and tests to check."""
    found = localnet.leftovers()
    found += [str(d) for d in CGROUP_ROOT.glob(f"*/{localnet.NETNS_PREFIX}*")]
    found += [str(d) for d in CGROUP_ROOT.glob(f"{localnet.NETNS_PREFIX}*")]
    if _sh("mountpoint", "-q", str(HOSTPATH_PV), check=False).returncode == 0:
        found.append(f"mount {HOSTPATH_PV}")
    found += [f"process {p.name}" for p in Path("/proc").iterdir() if p.name.isdigit()
              and str(state_root) in _cmdline(p)]
    if state_root.exists():
        found.append(str(state_root))
    return found


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def stop_all(state_root: Path) -> None:
    """Remove every process, mount, namespace, interface, route and cgroup of the nodes
    (idempotent). Nodes another clone started are left alone."""
    owner = _owner()
    if owner and owner != str(state_root):
        return
    names = _node_names()
    for name in names:
        _set_frozen(name, False)  # a frozen process does not die, even of SIGKILL
    for _ in range(50):
        pids = _pids(names, state_root)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    else:
        raise LocalNodeError(f"node processes survived SIGKILL: {sorted(_pids(names, state_root))}")
    try:
        for name in names:
            _remove_cgroups(name)
    except OSError as e:
        raise LocalNodeError(f"could not remove the nodes' cgroups: {e}") from e
    localnet.teardown()
    _unmount_volumes(state_root / "volumes")
    shutil.rmtree(state_root, ignore_errors=True)
    OWNER_FILE.unlink(missing_ok=True)
