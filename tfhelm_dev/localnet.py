"""The real nodes' network: a bridge on the host, a network namespace per node, and plain
routes between the nodes' pod ranges (what flannel's host-gw backend does between machines).

    host  tfh-br 10.231.0.1/24 ─┬─ veth ─ 10.231.0.2  tfhelm-node-user    cni0 10.232.0.1/24 ─ pods
      (API server, NodePorts)   ├─ veth ─ 10.231.0.3  tfhelm-node-train1  cni0 10.232.1.1/24 ─ pods
                                └─ veth ─ 10.231.0.4  tfhelm-node-train2  cni0 10.232.2.1/24 ─ pods

The host and every node route each other node's pod range via that node's address, so a pod
reaches another node's pods with its own address (no tunnel, no NAT between pods: NetworkPolicy
sees real sources), and the host reaches every pod (Prometheus scraping them, the API server
answering them). No namespace has a default route and the host forwards nothing (the bridge
switches between the nodes): nothing leaves the machine. teardown() removes every namespace and
interface of this layout by name, whatever was started.
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tfhelm.errors import TfhelmError

BRIDGE = "tfh-br"
HOST_IP = "10.231.0.1"
NODE_NETWORK = ipaddress.ip_network("10.231.0.0/24")
POD_NETWORK = ipaddress.ip_network("10.232.0.0/16")  # one /24 per node
NETNS_PREFIX = "tfhelm-node"  # every node's namespace is named after the node, which starts so
IF_PREFIX = "tfh-"            # every host interface of the layout (the bridge, the veths)
NETNS_DIR = Path("/run/netns")


class LocalNetError(TfhelmError):
    """The nodes' network could not be set up."""


@dataclass(frozen=True)
class NodeNet:
    """One node's place on the network; index 0.. picks its addresses."""

    name: str   # node name, which is also its network namespace
    index: int

    @property
    def ip(self) -> str:
        return str(NODE_NETWORK[2 + self.index])

    @property
    def pod_cidr(self) -> str:
        return str(list(POD_NETWORK.subnets(new_prefix=24))[self.index])

    @property
    def pod_gateway(self) -> str:
        return str(ipaddress.ip_network(self.pod_cidr)[1])

    @property
    def netns(self) -> Path:
        return NETNS_DIR / self.name

    @property
    def host_if(self) -> str:  # at most 15 characters
        return (IF_PREFIX + self.name.removeprefix(NETNS_PREFIX).strip("-"))[:15]


NODE_IF = "eth0"  # the node's end of its veth, inside its namespace


def sh(*args: str, check: bool = True, netns: Path | None = None, **kw) -> subprocess.CompletedProcess:
    cmd = (["nsenter", f"--net={netns}", "--"] if netns else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise LocalNetError(f"{' '.join(args)}: {(proc.stderr or proc.stdout).strip()}")
    return proc


def setup(nodes: list[NodeNet]) -> None:
    """The bridge, each node's namespace and veth, and the routes between pod ranges."""
    NETNS_DIR.mkdir(parents=True, exist_ok=True)
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "addr", "add", f"{HOST_IP}/{NODE_NETWORK.prefixlen}", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    for n in nodes:
        sh("ip", "netns", "add", n.name)
        sh("ip", "link", "add", n.host_if, "type", "veth", "peer", "name", NODE_IF, "netns", n.name)
        sh("ip", "link", "set", n.host_if, "master", BRIDGE, "up")
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["ip", "addr", "add", f"{n.ip}/{NODE_NETWORK.prefixlen}", "dev", NODE_IF],
                    ["ip", "link", "set", NODE_IF, "up"],
                    ["sysctl", "-qw", "net.ipv4.ip_forward=1"],
                    ["sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"]):
            sh(*cmd, netns=n.netns)
        # kube-proxy's rules must see traffic between pods on the bridge (Service hairpin).
        sh("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1", netns=n.netns, check=False)
        # Replies to pods (e.g. the API server answering the reaper) go back through the node.
        sh("ip", "route", "add", n.pod_cidr, "via", n.ip, "dev", BRIDGE)
        for other in nodes:
            if other != n:
                sh("ip", "route", "add", other.pod_cidr, "via", other.ip, "dev", NODE_IF, netns=n.netns)


def unplug(n: NodeNet) -> None:
    """Cut the node's cable: nothing reaches it or leaves it until plug()."""
    sh("ip", "link", "set", n.host_if, "down")


def plug(n: NodeNet) -> None:
    sh("ip", "link", "set", n.host_if, "up")


def leftovers() -> list[str]:
    """Namespaces and host interfaces of this layout that exist now (namespaces first),
    and host routes to pod ranges."""
    names = [line.split()[0] for line in sh("ip", "netns", "list", check=False).stdout.splitlines() if line.strip()]
    links = [line.split(":")[1].strip().split("@")[0]
             for line in sh("ip", "-o", "link", "show", check=False).stdout.splitlines()]
    routes = [r for r in sh("ip", "route", "show", check=False).stdout.splitlines()
              if r.split()[0] != "default" and ipaddress.ip_network(r.split()[0], strict=False).overlaps(POD_NETWORK)]
    return ([n for n in names if n.startswith(NETNS_PREFIX)] +
            [link for link in links if link.startswith(IF_PREFIX)] + [f"route {r}" for r in routes])


def teardown() -> None:
    """Remove every node namespace (their veths go with them) and the bridge (its routes go
    with it). Idempotent; the nodes' processes must be gone first."""
    for name in leftovers():
        if name.startswith(NETNS_PREFIX):
            sh("ip", "netns", "delete", name, check=False)
        elif name.startswith("route "):
            sh("ip", "route", "delete", *name.split()[1:], check=False)
        else:
            sh("ip", "link", "delete", name, check=False)
    left = leftovers()
    if left:
        raise LocalNetError(f"could not remove {', '.join(left)}")
