"""The local cluster's real node: pods that really run.
(One module, over 400 lines: start() and stop() mirror each other - namespaces, mounts,
cgroups, processes - and stay correct only when read together.)

kubelet and kube-proxy (the pinned Kubernetes), containerd 2 with Debian's runc and CNI
plugins, and CoreDNS run as host processes, with kube-router's network policy controller enforcing
NetworkPolicy (iptables and ipsets; its routing and service proxy are off), inside a network namespace made for the node
(no default route: nothing leaves the machine) and a private mount namespace (their
/run, /var/lib and /var/log are the node's own), under a cgroup of their own. The host
reaches the node over a veth pair; the API server listens on the host end too, so the
node, and pods through the `kubernetes` Service, reach it. Images come from the archive
hack/images/build.py makes; nothing is pulled. stop() leaves no process, mount,
namespace or cgroup behind.

      host 10.231.0.1 ──veth── 10.231.0.2 node (netns tfhelm-node)
                                   └─ bridge cni0 10.232.0.1/24 ── pods
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from tfhelm.errors import TfhelmError

NAME = "tfhelm-node"  # node name, network namespace and cgroup
NETNS_PATH = Path("/run/netns") / NAME
HOST_IF, NODE_IF = "tfh-host", "tfh-node"
HOST_IP, NODE_IP = "10.231.0.1", "10.231.0.2"
POD_CIDR, POD_GATEWAY = "10.232.0.0/24", "10.232.0.1"
SERVICE_CIDR, KUBERNETES_SERVICE_IP = "10.96.0.0/16", "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"
SANDBOX_IMAGE = "tfhelm/pause:local"
LABELS = {"tfhelm.io/real-node": "true",
          # The only real node is also the user node (charts/user-env places workspaces
          # there); the tainted user node for scheduling tests is a kwok node.
          "tfhelm.io/node-role": "user"}
# What the node needs on the host besides the binaries `make node` builds.
HOST_TOOLS = ("runc", "iptables", "ip", "nsenter", "unshare", "mount", "conntrack", "bindfs", "ipset")
# Where kube-controller-manager's host-path provisioner makes volumes (fixed in Kubernetes).
HOSTPATH_PV = Path("/tmp/hostpath_pv")
CNI_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
NODE_BINARIES = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "coredns",
                 "kube-router")


# The network namespace, cgroup and veth names are machine-wide: one real node per
# machine. This file names the state directory of the clone that runs it, so another
# clone's `down` never stops it.
OWNER_FILE = Path("/run/tfhelm-node.owner")


class LocalNodeError(TfhelmError):
    """The real node could not be started or stopped."""


@dataclass(frozen=True)
class Paths:
    state: Path      # per run: configs, logs, kubelet and CNI state (removed by stop)
    containerd: Path  # kept across runs: image content and snapshots (the images' cache)

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def pids(self) -> Path:
        return self.state / "pids"

    @property
    def socket(self) -> Path:
        return self.state / "run" / "containerd.sock"


# ---------------------------------------------------------------- shell helpers

def _sh(*args: str, check: bool = True, netns: bool = False, **kw) -> subprocess.CompletedProcess:
    cmd = (["nsenter", f"--net={NETNS_PATH}", "--"] if netns else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
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


# ---------------------------------------------------------------- network

def _setup_network() -> None:
    NETNS_PATH.parent.mkdir(parents=True, exist_ok=True)
    _sh("ip", "netns", "add", NAME)
    _sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NODE_IF, "netns", NAME)
    _sh("ip", "addr", "add", f"{HOST_IP}/30", "dev", HOST_IF)
    _sh("ip", "link", "set", HOST_IF, "up")
    # Replies to pods (e.g. the API server answering the reaper) go back through the node.
    _sh("ip", "route", "add", POD_CIDR, "via", NODE_IP, "dev", HOST_IF)
    for cmd in (["ip", "link", "set", "lo", "up"],
                ["ip", "addr", "add", f"{NODE_IP}/30", "dev", NODE_IF],
                ["ip", "link", "set", NODE_IF, "up"],
                ["sysctl", "-qw", "net.ipv4.ip_forward=1"],
                ["sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"]):
        _sh(*cmd, netns=True)
    # kube-proxy's rules must see traffic between pods on the bridge (Service hairpin).
    _sh("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1", netns=True, check=False)


# ---------------------------------------------------------------- volumes

def _mount_volumes(p: Paths) -> None:
    """The host-path provisioner makes root-owned 0750 directories, which pods running as
    a non-root user cannot write (the kubelet applies no fsGroup to host paths). Serve
    them through bindfs, writable by every user and files owned by their creator, as
    kind's local-path volumes (0777) are."""
    backing = p.state / "volumes"
    backing.mkdir(parents=True, exist_ok=True)
    HOSTPATH_PV.mkdir(parents=True, exist_ok=True)
    # nonempty: kwok-only clusters of other clones may have made (unused) directories there.
    _sh("bindfs", "-o", "allow_other,nonempty", "--perms=a+rwX", str(backing), str(HOSTPATH_PV))


def _unmount_volumes() -> None:
    while _sh("mountpoint", "-q", str(HOSTPATH_PV), check=False).returncode == 0:
        _sh("umount", str(HOSTPATH_PV), check=False)


# ---------------------------------------------------------------- cgroups

def _cgroup_dirs() -> list[Path]:
    """The node's cgroup in every hierarchy (cgroup v1: one per controller)."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").is_file():  # v2
        return [root / NAME]
    return [d / NAME for d in root.iterdir()
            if d.is_dir() and not d.is_symlink() and (d / "cgroup.procs").is_file()]


def _make_cgroups() -> None:
    root = Path("/sys/fs/cgroup")
    v2 = (root / "cgroup.controllers").is_file()
    if v2:  # the controllers the kubelet needs, delegated down to the node's cgroup
        wanted = set((root / "cgroup.controllers").read_text().split()) & {"cpu", "cpuset", "memory", "pids", "io"}
        enable = " ".join(f"+{c}" for c in sorted(wanted))
        (root / "cgroup.subtree_control").write_text(enable)
    for d in _cgroup_dirs():
        d.mkdir(exist_ok=True)
        if d.parent.name == "cpuset":  # v1 cpuset children start empty: inherit the parent's
            for f in ("cpuset.cpus", "cpuset.mems"):
                (d / f).write_text((d.parent / f).read_text())
    if v2:
        (root / NAME / "cgroup.subtree_control").write_text(enable)


def _cgroup_pids() -> set[int]:
    pids: set[int] = set()
    for d in _cgroup_dirs():
        for procs in d.rglob("cgroup.procs") if d.is_dir() else ():
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except OSError:
                pass
    return pids


def _remove_cgroups() -> None:
    for d in _cgroup_dirs():
        if d.is_dir():
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                sub.rmdir()
            d.rmdir()


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


def _containerd_config(p: Paths, bins: Path) -> str:
    return f"""version = 3
root = "{p.containerd}"
state = "{p.state / 'run' / 'containerd-state'}"
[grpc]
  address = "{p.socket}"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{SANDBOX_IMAGE}"
[plugins.'io.containerd.cri.v1.runtime']
  # root here lacks CAP_SYS_RESOURCE: never lower a process's OOM score below ours
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [{", ".join(f'"{d}"' for d in CNI_DIRS)}]
  conf_dir = "{p.state / 'cni' / 'net.d'}"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{shutil.which('runc')}"
  SystemdCgroup = false
"""


def _cni_config(p: Paths) -> str:
    return json.dumps({
        "cniVersion": "1.0.0", "name": "tfhelm",
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR, "gateway": POD_GATEWAY}]],
                      "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(p.state / "cni" / "ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }, indent=1)


def _kubelet_config(p: Paths, pki: Path) -> str:
    return yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": NODE_IP, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(pki / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{NAME}", "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{p.socket}",
        "clusterDNS": [NODE_IP], "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(p.state / "resolv.conf"),
        "podLogsDir": str(p.state / "pods-logs"),
        "evictionHard": {"memory.available": "200Mi", "nodefs.available": "2%",
                         "imagefs.available": "2%", "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 99, "imageGCLowThresholdPercent": 98,
        "serializeImagePulls": False, "maxPods": 110,
        "enforceNodeAllocatable": ["pods"],
        "shutdownGracePeriod": "0s",
    })


def _kube_proxy_config(kubeconfig: Path) -> str:
    return yaml.safe_dump({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NAME, "mode": "iptables", "clusterCIDR": POD_CIDR,
        "nodePortAddresses": [f"{NODE_IP}/32"],
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

def _spawn(p: Paths, name: str, args: list[str], holder: int | None, env: dict | None = None) -> int:
    p.logs.mkdir(parents=True, exist_ok=True)
    p.pids.mkdir(parents=True, exist_ok=True)
    prefix = ["nsenter", f"--target={holder}", "--mount", "--net", "--"] if holder else []
    with open(p.logs / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(prefix + args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
    (p.pids / f"{name}.pid").write_text(str(proc.pid))
    return proc.pid


def _start_holder(p: Paths) -> int:
    """A process that owns the node's mount namespace: tmpfs /run, the node's /var/lib
    and /var/log. Every node process enters it (and the network namespace)."""
    for d in ("var-lib", "var-log", "run", "cni/net.d", "pods-logs"):
        (p.state / d).mkdir(parents=True, exist_ok=True)
    script = (f"mount -t tmpfs -o mode=0755 tmpfs /run && mount --bind {p.state / 'var-lib'} /var/lib && "
              f"mount --bind {p.state / 'var-log'} /var/log && mkdir -p /run/netns && exec sleep infinity")
    pid = _spawn(p, "holder", ["nsenter", f"--net={NETNS_PATH}", "--", "unshare", "--mount",
                               "--propagation", "private", "--", "/bin/sh", "-c", script], None)
    # nsenter, unshare and sh each exec the next: the pid stays, and once it runs
    # `sleep` the mounts are in place.
    _wait_for(lambda: _comm(pid) == "sleep", 10, "the node's namespaces", p.logs / "holder.log")
    return pid


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _node_pids(holder: int | None) -> set[int]:
    """Every process of the node: in its mount or network namespace, or in its cgroups."""
    mnt = _inode(f"/proc/{holder}/ns/mnt") if holder else None
    net = _inode(str(NETNS_PATH))
    found = _cgroup_pids()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        ns_mnt, ns_net = _inode(f"{proc}/ns/mnt"), _inode(f"{proc}/ns/net")
        if (mnt and ns_mnt == mnt) or (net and ns_net == net):
            found.add(int(proc.name))
    return found


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


# ---------------------------------------------------------------- API

def running(p: Paths) -> bool:
    holder = _read_pid(p, "holder")
    return bool(holder and NETNS_PATH.exists() and _inode(f"/proc/{holder}/ns/mnt"))


def _read_pid(p: Paths, name: str) -> int | None:
    try:
        return int((p.pids / f"{name}.pid").read_text())
    except (OSError, ValueError):
        return None


def start(p: Paths, bins: Path, apiserver_port: int, pki: Path, images: Path | None, kubectl) -> None:
    """Start the node; returns once it registered (Ready is the caller's wait).

    kubectl(*args) runs kubectl against the cluster from the host."""
    missing = missing_host_tools()
    if missing:
        raise LocalNodeError(f"the real node needs {', '.join(missing)} on the host; run `make node`")
    if os.geteuid() != 0:
        raise LocalNodeError("the real node needs root (network namespace, mounts, cgroups)")
    owner = _owner()
    if owner and owner != str(p.state) and NETNS_PATH.exists() and _holder_alive(Path(owner)):
        raise LocalNodeError(f"the machine's real node belongs to the local cluster of {owner}; "
                             "stop that one first (`tfhelm cluster down` there)")
    OWNER_FILE.unlink(missing_ok=True)  # a stale claim (its processes are gone): ours now
    stop(p)
    p.state.mkdir(parents=True, exist_ok=True)
    OWNER_FILE.write_text(str(p.state))
    p.containerd.mkdir(parents=True, exist_ok=True)
    _setup_network()
    _make_cgroups()
    _mount_volumes(p)  # before the node's mount namespace copies the host's mounts
    kubeconfig = p.state / "kubeconfig"
    kubeconfig.write_text(_kubeconfig(f"https://{HOST_IP}:{apiserver_port}", pki))
    (p.state / "containerd.toml").write_text(_containerd_config(p, bins))
    (p.state / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
    (p.state / "cni" / "net.d" / "10-tfhelm.conflist").write_text(_cni_config(p))
    (p.state / "kubelet.yaml").write_text(_kubelet_config(p, pki))
    (p.state / "kube-proxy.yaml").write_text(_kube_proxy_config(kubeconfig))
    (p.state / "Corefile").write_text(_corefile(kubeconfig))
    (p.state / "resolv.conf").write_text("")  # no upstream resolver for pods
    holder = _start_holder(p)
    # containerd finds its shim on PATH: ours first, never an older one of the host.
    env = dict(os.environ, PATH=f"{bins}:{os.environ.get('PATH', '')}")
    _spawn(p, "containerd", [str(bins / "containerd"), "--config", str(p.state / "containerd.toml")], holder, env)
    _wait_for(p.socket.exists, 30, "containerd's socket", p.logs / "containerd.log")
    if images is not None:
        import_images(p, bins, images, holder)
    _spawn(p, "coredns", [str(bins / "coredns"), "-conf", str(p.state / "Corefile")], holder)
    _spawn(p, "kube-proxy", [str(bins / "kube-proxy"), "--config", str(p.state / "kube-proxy.yaml")], holder, env)
    labels = ",".join(f"{k}={v}" for k, v in LABELS.items())
    _spawn(p, "kubelet", [str(bins / "kubelet"), "--config", str(p.state / "kubelet.yaml"),
                          "--kubeconfig", str(kubeconfig), "--hostname-override", NAME,
                          "--node-ip", NODE_IP, "--node-labels", labels,
                          "--cert-dir", str(p.state / "kubelet-pki")], holder, env)
    _wait_for(lambda: kubectl("get", "node", NAME, check=False).returncode == 0, 90,
              f"node {NAME} to register", p.logs / "kubelet.log")
    # NetworkPolicy enforcement only (it needs the Node object): the bridge CNI routes,
    # kube-proxy serves Services.
    _spawn(p, "kube-router", [str(bins / "kube-router"), "--kubeconfig", str(kubeconfig),
                              "--hostname-override", NAME, "--run-firewall=true", "--run-router=false",
                              "--run-service-proxy=false", "--enable-cni=false", "--health-port=0",
                              "--iptables-sync-period=30s"], holder, env)


def _ctr(p: Paths, bins: Path, holder: int, *args: str, **kw) -> subprocess.CompletedProcess:
    return _sh("nsenter", f"--target={holder}", "--mount", "--net", "--",
               str(bins / "ctr"), "--address", str(p.socket), "-n", "k8s.io", *args, **kw)


def import_images(p: Paths, bins: Path, archive: Path, holder: int) -> None:
    """Import the image archive unless containerd already holds this exact archive."""
    stamp = p.containerd / "imported.key"
    key = (archive.parent / "images.key").read_text() if (archive.parent / "images.key").is_file() else ""
    # Containers of an earlier run are gone with its processes: forget them.
    stale = _ctr(p, bins, holder, "containers", "ls", "-q", check=False).stdout.split()
    if stale:
        _ctr(p, bins, holder, "containers", "rm", *stale, check=False)
    if key and stamp.is_file() and stamp.read_text() == key:
        return
    _ctr(p, bins, holder, "images", "import", "--all-platforms", "--snapshotter", "overlayfs", str(archive),
         timeout=900)
    stamp.write_text(key)


def _holder_alive(state: Path) -> bool:
    try:
        pid = int((state / "pids" / "holder.pid").read_text())
    except (OSError, ValueError):
        return False
    return _comm(pid) == "sleep"


def _owner() -> str | None:
    try:
        return OWNER_FILE.read_text().strip() or None
    except OSError:
        return None


def stop(p: Paths) -> None:
    """Remove every process, mount, namespace and cgroup of the node (idempotent). A node
    another clone started is left alone."""
    owner = _owner()
    if owner and owner != str(p.state):
        return
    holder = _read_pid(p, "holder")
    if holder and _comm(holder) != "sleep":
        holder = None  # pid reused: not ours
    for _ in range(50):
        pids = _node_pids(holder)
        if holder and _inode(f"/proc/{holder}/ns/mnt"):
            pids.add(holder)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    else:
        raise LocalNodeError(f"node processes survived SIGKILL: {sorted(_node_pids(holder))}")
    try:
        _remove_cgroups()
    except OSError as e:
        raise LocalNodeError(f"could not remove the node's cgroups: {e}") from e
    if NETNS_PATH.exists() or _sh("ip", "netns", "list", check=False).stdout.count(NAME):
        _sh("ip", "netns", "delete", NAME, check=False)
    _sh("ip", "link", "delete", HOST_IF, check=False)  # gone with the namespace; belt and braces
    _unmount_volumes()
    shutil.rmtree(p.state, ignore_errors=True)
    OWNER_FILE.unlink(missing_ok=True)
