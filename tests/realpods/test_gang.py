"""Kubernetes' own gang scheduling (tf-cluster `gang.enabled`, docs/gang.md; alpha in 1.36) on
the two real training nodes: a gang cluster that cannot fit beside a running one binds no pod
at all, not even its small PS that would fit, until all of them can; then it binds them all at
once. Seen from a watch of its pods (the scheduler's Unschedulable condition, the first event
with `spec.nodeName` of each).

Needs a local cluster started with the gates (`tfhelm cluster up`, tfhelm_dev/localcluster.py
GANG_FEATURE_GATES); skipped where scheduling.k8s.io/v1alpha2 is not served."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from .conftest import Nodes, run, wait_for

SLEEP = "import time\nprint('holding', flush=True)\ntime.sleep(3600)\n"
STORAGE = ["--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi"]


def _millicores(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def free_cpu(core, node: str) -> int:
    """A node's allocatable CPU less what its live pods request, in millicores."""
    alloc = _millicores(core.read_node(node).status.allocatable["cpu"])
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    used = sum(_millicores((c.resources.requests or {}).get("cpu", "0")) for p in pods
               if p.status.phase not in ("Succeeded", "Failed") for c in p.spec.containers
               if c.resources and c.resources.requests)
    return alloc - used


class Bindings:
    """When each pod of a cluster was first seen bound (`spec.nodeName` set), from a watch."""

    def __init__(self, core, namespace: str, cluster: str):
        self.bound: dict[str, tuple[float, str]] = {}
        self.seen: set[str] = set()
        self.refused: set[str] = set()  # the scheduler said Unschedulable (its verdict, not a timeout)
        self._stop = threading.Event()
        self._args = (core, namespace, f"tfhelm.io/cluster={cluster},tfhelm.io/role in (chief,worker,ps,evaluator)")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        core, namespace, selector = self._args
        while not self._stop.is_set():
            w = watch.Watch()
            for event in w.stream(core.list_namespaced_pod, namespace, label_selector=selector, timeout_seconds=5):
                pod = event["object"]
                self.seen.add(pod.metadata.name)
                if any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
                       for c in pod.status.conditions or []):
                    self.refused.add(pod.metadata.name)
                if pod.spec.node_name and pod.metadata.name not in self.bound:
                    self.bound[pod.metadata.name] = (time.monotonic(), pod.spec.node_name)
                if self._stop.is_set():
                    w.stop()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=15)


def test_a_gang_binds_nothing_until_all_of_it_fits(core, api_client, nodes: Nodes, namespace):
    try:
        client.CustomObjectsApi(api_client).list_namespaced_custom_object(
            "scheduling.k8s.io", "v1alpha2", namespace, "podgroups")
    except ApiException as e:
        if e.status == 404:
            pytest.skip("scheduling.k8s.io/v1alpha2 is not served: start the local cluster with the gang gates")
        raise
    # Each worker takes 60% of the freer training node's free CPU: two clusters' workers cannot
    # share the nodes, but the 40% left easily holds the gang's PS (100m) beside the holder.
    big = int(min(free_cpu(core, n) for n in nodes.training) * 0.6)
    assert big > 500, f"the training nodes have too little free CPU for this test ({big}m)"
    workers = ["--workers", "2", "--set", f"worker.resources.requests.cpu={big}m",
               "--set", f"worker.resources.limits.cpu={big}m"]
    hold_script = namespace_script(namespace, "hold.py")
    run("tfhelm", "up", "--name", "hold", "-n", namespace, "--ps", "0", *workers, "--script", hold_script,
        *Nodes.spread("worker", "hold"), *STORAGE)
    wait_for(lambda: len([p for p in core.list_namespaced_pod(namespace, label_selector="tfhelm.io/cluster=hold,"
                                                             "tfhelm.io/role=worker").items
                          if p.status.phase == "Running"]) == 2, 300, what="the holder's two workers running")

    bindings = Bindings(core, namespace, "gang")
    try:
        run("tfhelm", "up", "--name", "gang", "-n", namespace, "--ps", "1", *workers, "--script", hold_script,
            "--set", "gang.enabled=true", *Nodes.spread("worker", "gang"), *STORAGE)
        groups = client.CustomObjectsApi(api_client)
        (group,) = groups.list_namespaced_custom_object(
            "scheduling.k8s.io", "v1alpha2", namespace, "podgroups",
            label_selector="tfhelm.io/cluster=gang")["items"]
        assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3

        def refused() -> bool:
            """The scheduler's verdict on the whole gang: the PodGroup's condition, or every pod's."""
            now = groups.get_namespaced_custom_object("scheduling.k8s.io", "v1alpha2", namespace, "podgroups",
                                                      group["metadata"]["name"])
            return len(bindings.refused) >= 3 or any(
                c["type"] == "PodGroupScheduled" and c["status"] == "False"
                for c in (now.get("status") or {}).get("conditions") or [])
        # The scheduler tries the whole gang once all of its pods exist, and refuses it all, the
        # PS that alone would fit included; the watch saw any binding since the submit.
        wait_for(lambda: len(bindings.seen) >= 3 and refused(), 300,
                 what="the scheduler's verdict (Unschedulable) on the gang of a PS and two workers")
        assert not bindings.bound, f"gang pods bound while the cluster cannot fit whole: {bindings.bound}"
        freed = time.monotonic()
        run("tfhelm", "down", "hold", "-n", namespace)
        wait_for(lambda: len(bindings.bound) >= 3, 300, what="every gang pod bound once the holder is gone")
        assert min(t for t, _ in bindings.bound.values()) >= freed, "nothing bound before capacity was freed"
        assert len({node for _, node in bindings.bound.values()}) == 2, bindings.bound
    finally:
        bindings.stop()  # the namespace fixture removes both clusters


def namespace_script(namespace: str, name: str) -> str:
    """A script file for `tfhelm up --script` (shipped inline: a few bytes)."""
    path = Path(tempfile.mkdtemp(prefix=f"{namespace}-")) / name
    path.write_text(SLEEP)
    return str(path)
