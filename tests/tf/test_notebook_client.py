"""In-graph training driven from outside the cluster (a user's notebook): the chart runs
only PS and worker servers, whose TF_CONFIG lists no chief, and the notebook takes the
TF_CONFIG `tfhelm tfconfig NAME --client HOST:PORT` gives it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tfhelm.chart import default_values
from tfhelm.cli import app
from tfhelm.cluster import localrun, manifests, spec

from .helpers import EXAMPLES, TASK_ENV, Collect, events, latest_checkpoint_step, metrics, topology

STEPS = 20
ARGS = ["--steps", str(STEPS), "--checkpoint-every", "10"]
TIMEOUT = 300  # a guard against hangs only


def test_a_notebook_drives_the_servers_of_an_in_graph_cluster(tmp_path):
    values = {"worker": {"replicas": 2}, "ps": {"replicas": 1}, "mode": "in-graph"}
    ports = localrun.free_ports(4)
    servers, _ = topology(values, "nb", "alice", ports[:3])
    assert {t.mode for t in servers} == {localrun.SERVER}
    assert not any("chief" in t.tf_config["cluster"] for t in servers)

    client = f"127.0.0.1:{ports[3]}"
    result = CliRunner().invoke(app, ["tfconfig", "nb", "-n", "alice", "--workers", "2", "--ps", "1",
                                      "--set", "mode=in-graph", "--client", client])
    assert result.exit_code == 0, result.output
    chief_config = json.loads(result.stdout)
    generation = manifests.cluster_config(manifests.render({**values, "clusterName": "nb"}, "nb", "alice"))[1]
    assert chief_config == {"cluster": {"chief": [client], **spec.cluster_spec(
        "nb", "alice", spec.Shape(workers=2, ps=1), cluster_domain=default_values()["clusterDomain"],
        generation=generation)},
        "task": {"type": "chief", "index": 0}}
    # Here the servers' hosts are loopback ports instead of the chart's DNS names.
    chief_config["cluster"] = {"chief": [client], **servers[0].tf_config["cluster"]}
    chief = localrun.LocalTask("chief", 0, localrun.SCRIPT, chief_config)

    dirs = localrun.RunDirs(tmp_path)
    with localrun.LoopbackCluster([*servers, chief], str(EXAMPLES / "ps_in_graph.py"), ARGS, dirs,
                               sink=Collect(), base_env=TASK_ENV, grace=30) as cluster:
        result = cluster.wait(timeout=TIMEOUT)
    assert result.exit_code == 0 and result.returncodes["chief-0"] == 0
    assert sorted(result.stopped) == ["ps-0", "worker-0", "worker-1"]  # the reaper's rule
    steps = [e["step"] for e in events(metrics(dirs.log, "chief-0"), "step")]
    assert steps and steps[-1] == STEPS
    assert latest_checkpoint_step(dirs.checkpoints) == STEPS
