"""The Python API from a user's notebook, for real: the workspace's example notebook
(examples/tfhelm_api.ipynb, which the notebook image copies into the work directory) is
executed by `jupyter nbconvert --execute` inside the notebook pod on the user node, with
nothing but the notebook's own ServiceAccount. Its in-graph cell makes the kernel the chief
of servers on the training nodes and the loss falls; its between-graph cell runs a script
of the work directory on two workers, waits (a live bar in the cell), reads the loss back
from the workers' log, reaps the parameter server; its last cell removes the run. Nothing of
either cluster is left."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from kubernetes import client

from tfhelm.workspace import userspec

from .conftest import run, wait_for

CLUSTERS = ("nb-in-graph", "nb-between")


@pytest.fixture
def user(kubeconfig):
    name = f"n{uuid.uuid4().hex[:5]}"
    run("tfhelm", "user", "add", name, "--timeout", "300")
    yield name
    run("tfhelm", "user", "remove", name, "--purge")


def cell_text(cell: dict) -> str:
    """A cell's outputs as text: streams, results, errors, and HTML displays."""
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            parts.append("".join(out["text"]))
        elif out["output_type"] == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
        else:
            data = out.get("data", {})
            parts.append("".join(data.get("text/html", data.get("text/plain", ""))))
    return "".join(parts)


def left_of(api: client.ApiClient, ns: str) -> list[str]:
    """Objects of either cluster still in the namespace (Helm's release records too)."""
    core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
    sel = f"tfhelm.io/cluster in ({','.join(CLUSTERS)})"
    found = [f"{kind} {o.metadata.name}" for kind, items in (
        ("pod", core.list_namespaced_pod(ns, label_selector=sel).items),
        ("service", core.list_namespaced_service(ns, label_selector=sel).items),
        ("configmap", core.list_namespaced_config_map(ns, label_selector=sel).items),
        ("pvc", core.list_namespaced_persistent_volume_claim(ns, label_selector=sel).items),
        ("job", batch.list_namespaced_job(ns, label_selector=sel).items),
        ("deployment", apps.list_namespaced_deployment(ns, label_selector=sel).items)) for o in items]
    releases = {c for name in CLUSTERS for c in (name, f"{name}-ps")}
    found += [f"release secret {s.metadata.name}" for s in core.list_namespaced_secret(ns, label_selector="owner=helm").items
              if s.metadata.labels.get("name") in releases]
    return found


def test_the_example_notebook_trains_in_graph_and_between_graph_from_the_notebook_pod(user, core, api_client, nodes):
    ns = userspec.user_namespace(user)
    pod = core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/component=notebook").items[0]
    assert pod.spec.node_name == nodes.user
    assert pod.spec.service_account_name == userspec.service_account()
    workdir = next(a.split("=", 1)[1] for a in pod.spec.containers[0].args if a.startswith("--notebook-dir="))

    def exec_(*cmd: str, timeout: float = 120):
        return run("kubectl", "exec", "-n", ns, pod.metadata.name, "-c", "notebook", "--", *cmd, timeout=timeout)

    # The kernel has no credentials but the pod's ServiceAccount: no kubeconfig anywhere.
    exec_("sh", "-c", 'test -z "${KUBECONFIG:-}" && test ! -e "$HOME/.kube/config"')
    notebook = f"{workdir}/examples/tfhelm_api.ipynb"  # copied there by the image when Jupyter started
    exec_("jupyter", "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=1500",
          "--output-dir", "/tmp", "--output", "executed", notebook, timeout=1800)
    cells = [c for c in json.loads(exec_("cat", "/tmp/executed.ipynb").stdout)["cells"] if c["cell_type"] == "code"]
    texts = [cell_text(c) for c in cells]
    setup, in_graph, between, loss, cleanup = texts

    assert "in-graph loss fell from" in in_graph, in_graph
    servers = json.loads(re.search(r"servers on (\[.*\])", in_graph).group(1).replace("'", '"'))
    assert servers and set(servers) <= set(nodes.training), servers  # not the user node
    assert "<progress" in in_graph, "strategy() showed the servers starting as a live bar"

    assert "training complete" in between, between
    assert "worker tasks succeeded" in between and "2/2" in between, "wait() showed a live bar"
    # reap() removed the parameter server (or found it gone: an in-cluster reaper may be quicker)
    assert "nb-between-ps" in between or "already gone" in between, between
    assert "between-graph loss fell from" in loss and "[worker-0] global step" in loss, loss
    assert "left: []" in cleanup, cleanup
    wait_for(lambda: not left_of(api_client, ns), 120, what="nothing of the notebook's clusters left")
