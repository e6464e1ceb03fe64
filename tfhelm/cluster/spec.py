"""The TensorFlow cluster spec: names, hosts and TF_CONFIG, without any I/O.

This module mirrors the chart's `charts/tf-cluster-lib/templates/_helpers-names.tpl`; tests render the
chart for many shapes and compare every pod's TF_CONFIG with what is computed here. Limits and
name patterns are the chart's own, read from its contract (tfhelm.contract). The
expansion of a cluster spec (per role a host pattern and a count) into TF_CONFIG's host lists
is the launcher's (tfhelm/pod/tfconfig.py, which every task runs): one function, used by both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tfhelm import contract
from tfhelm.errors import SpecError
from tfhelm.pod import tfconfig

# Task types, in the order TensorFlow documents them.
ROLES = ("chief", "worker", "ps", "evaluator")
# The training cluster in TF_CONFIG. The evaluator runs no server and stays out of it (as in
# TFJob): a coordinator or a collective would otherwise wait for it forever.
CLUSTER_ROLES = ("chief", "worker", "ps")
# Roles run as Indexed Jobs (one Job + one headless Service each); PS are Deployments.
JOB_ROLES = ("chief", "worker", "evaluator")

DEFAULT_PORT = 2222
MAX_WORKERS = contract.limit("workers")
MAX_PS = contract.limit("ps")
HELM_RELEASE_MAX = contract.limit("helmRelease")
DNS_LABEL_MAX = contract.limit("dnsLabel")
PS_RELEASE_SUFFIX = contract.contract()["names"]["psReleaseSuffix"]
# The chart's `tf-cluster.generation`: hex characters of a hash of the values, in Job names.
GENERATION_LEN = contract.contract()["names"]["generationLength"]
# The longest suffix a hostname gets below 10,000 workers: `-worker-<generation>-9999` (as
# long as `-evaluator-<generation>-0`). Names of MAX_NAME characters fit such clusters;
# larger ones need a character less per digit of the last worker index (see max_name).
_LONGEST_SUFFIX = f"-worker-{'0' * GENERATION_LEN}-9999"
MAX_NAME = contract.limit("clusterName")
DNS1035 = contract.regex("dns1035Label")
DNS1123_LABEL = contract.regex("dns1123Label")
DNS1123_SUBDOMAIN = contract.regex("dns1123Subdomain")


@dataclass(frozen=True)
class Shape:
    workers: int
    ps: int = 0
    chief: bool = False
    evaluator: bool = False

    def count(self, role: str) -> int:
        return {"chief": int(self.chief), "worker": self.workers, "ps": self.ps,
                "evaluator": int(self.evaluator)}[role]

    def validate(self) -> "Shape":
        if self.workers < 1:
            raise SpecError("--workers", f"must be at least 1, got {self.workers}",
                            "a TF cluster needs one worker task or more")
        if self.workers > MAX_WORKERS:
            raise SpecError("--workers", f"{self.workers} is over the limit of {MAX_WORKERS}")
        if not 0 <= self.ps <= MAX_PS:
            raise SpecError("--ps", f"must be between 0 and {MAX_PS}, got {self.ps}",
                            "each PS task is its own Deployment and Service")
        return self


def job_name(name: str, role: str, generation: str) -> str:
    """Job of a role in one generation; pod i's hostname is `<job>-<i>`. The generation is
    the chart's hash of the values: read it from the rendered chart (manifests.generation)."""
    return f"{name}-{role}-{generation}" if generation else f"{name}-{role}"


def service_name(name: str, role: str) -> str:
    """Headless Service of a Job role (its pods' subdomain): the same in every generation."""
    return f"{name}-{role}"


def ps_name(name: str, index: int) -> str:
    """Deployment and Service of PS task `index`."""
    return f"{name}-ps-{index}"


def ps_release(name: str) -> str:
    return name + PS_RELEASE_SUFFIX


def host(name: str, namespace: str, role: str, index: int | str, port: int = DEFAULT_PORT,
         cluster_domain: str = "", generation: str = "") -> str:
    suffix = f"{namespace}.svc" + (f".{cluster_domain}" if cluster_domain else "")
    if role == "ps":
        return f"{ps_name(name, index)}.{suffix}:{port}"
    return f"{job_name(name, role, generation)}-{index}.{service_name(name, role)}.{suffix}:{port}"


def compact_spec(name: str, namespace: str, shape: Shape, port: int = DEFAULT_PORT,
                 cluster_domain: str = "", generation: str = "") -> dict[str, dict]:
    """The chart's cluster spec (ConfigMap key `cluster-spec.json`): per role of the training
    cluster a host pattern and a count, so its size does not depend on the number of tasks."""
    return {role: {"count": shape.count(role),
                   "host": host(name, namespace, role, tfconfig.INDEX, port, cluster_domain, generation)}
            for role in CLUSTER_ROLES if shape.count(role)}


def cluster_spec(name: str, namespace: str, shape: Shape, port: int = DEFAULT_PORT,
                 cluster_domain: str = "", generation: str = "") -> dict[str, list[str]]:
    """The hosts of every task. Without a generation (local runs: no Jobs) Job names carry none."""
    return tfconfig.expand_cluster(compact_spec(name, namespace, shape, port, cluster_domain, generation))


def tasks(shape: Shape) -> list[tuple[str, int]]:
    return [(role, i) for role in ROLES for i in range(shape.count(role))]


def tf_config(cluster: dict[str, list[str]], task_type: str, index: int) -> dict:
    """TF_CONFIG of one task; the (single) evaluator gets the training cluster it evaluates."""
    if not (task_type == "evaluator" and index == 0) and index >= len(cluster.get(task_type, [])):
        have = ", ".join(f"{r}:0..{len(h) - 1}" for r, h in cluster.items())
        raise SpecError("--task", f"{task_type}:{index} is not in this cluster", f"tasks are {have}")
    return {"cluster": cluster, "task": {"type": task_type, "index": index}}


def check_task(shape: Shape, task_type: str, index: int) -> None:
    if (task_type, index) not in tasks(shape):
        have = ", ".join(f"{r}:{i}" for r, i in tasks(shape))
        raise SpecError("--task", f"{task_type}:{index} is not in this cluster", f"tasks are {have}")


def with_client(cluster: dict[str, list[str]], address: str) -> dict[str, list[str]]:
    """The cluster as an outside chief sees it (in-graph, driven from a notebook): itself
    as chief:0. The workers' and PS' TF_CONFIG need not list it: they never call the chief."""
    if "chief" in cluster:
        raise SpecError("--client", "this cluster has its own chief Job",
                        "install it without --chief to drive it from outside")
    host, _, port = address.rpartition(":")
    if not re.fullmatch(r"[A-Za-z0-9.\-]+", host) or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SpecError("--client", f"'{address}' is not HOST:PORT (a port from 1 to 65535)", "e.g. 10.1.2.3:2222")
    return {"chief": [address], **cluster}


dumps = tfconfig.dumps  # canonical JSON, byte-identical to Helm's `toJson`


def parse_task(text: str) -> tuple[str, int]:
    """`worker:3` -> ("worker", 3)."""
    role, _, index = text.partition(":")
    if role not in ROLES or not index.isdigit():
        raise SpecError("--task", f"'{text}' is not TYPE:INDEX",
                        f"use one of {', '.join(ROLES)} and an index, e.g. worker:0")
    return role, int(index)


def validate_name(name: str, field: str = "--name", shape: Shape | None = None) -> str:
    """A cluster name must be a DNS-1035 label short enough for Helm's 53-character release
    names once the PS release adds `-ps`, and for every hostname to fit in 63 characters:
    without a shape, that of any cluster under 10,000 workers (`-worker-<generation>-9999`),
    else that of `shape` (100,000 workers take a character more)."""
    if not DNS1035.fullmatch(name):
        raise SpecError(field, f"'{name}' is not a valid name",
                        "use lowercase letters, digits and '-', starting with a letter")
    longest = longest_hostname(name, shape) if shape else name + _LONGEST_SUFFIX
    limit = max_name(shape) if shape else MAX_NAME
    if len(name) > limit:
        workers = f" with {shape.workers:,} workers" if shape else ""
        fewer = ", or at most 10,000 workers" if shape and len(name) <= MAX_NAME else ""
        raise SpecError(field, f"'{name}' is {len(name)} characters; hostnames{workers} such as "
                        f"'{longest}' must fit in {DNS_LABEL_MAX}",
                        f"use at most {limit} characters{fewer}")
    return name


def max_name(shape: Shape) -> int:
    """The longest cluster name for this shape: MAX_NAME (as every command that takes a
    name allows), or less when the shape's longest hostname needs it."""
    return min(MAX_NAME, DNS_LABEL_MAX - len(longest_hostname("", shape)))


def validate_namespace(namespace: str, field: str = "--namespace") -> str:
    """A namespace is a DNS-1123 label; checked here so the API server's 422 never is."""
    if not DNS1123_LABEL.fullmatch(namespace) or len(namespace) > DNS_LABEL_MAX:
        raise SpecError(field, f"'{namespace}' is not a valid namespace",
                        f"use at most {DNS_LABEL_MAX} lowercase letters, digits and '-', "
                        "starting and ending with a letter or digit")
    return namespace


def longest_hostname(name: str, shape: Shape, generation: str = "0" * GENERATION_LEN) -> str:
    """The longest pod hostname a cluster gets (DNS labels are at most 63 characters)."""
    names = [ps_name(name, shape.ps - 1)] if shape.ps else [name]
    names += [f"{job_name(name, r, generation)}-{shape.count(r) - 1}" for r in JOB_ROLES if shape.count(r)]
    return max(names, key=len)
