"""`tfhelm run --local`'s plan and process lifecycle, with stand-in processes (no TF).

The plan must be the chart's: same TF_CONFIG per task (hosts mapped to loopback), same
launcher mode. The lifecycle follows the reaper's rule and leaves nothing behind.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tfhelm.cluster import localrun, spec
from tfhelm.cluster.localrun import SCRIPT, SERVER

from .helpers import alive, children, topology

SHAPES = [
    (spec.Shape(workers=2, ps=1), False),
    (spec.Shape(workers=3, ps=2, chief=True, evaluator=True), True),
    (spec.Shape(workers=3, ps=2, chief=True), False),
    (spec.Shape(workers=2), False),
    (spec.Shape(workers=4, chief=True, evaluator=True), False),
]


def chart_values(shape: spec.Shape, in_graph: bool) -> dict:
    return {"worker": {"replicas": shape.workers}, "ps": {"replicas": shape.ps},
            "chief": {"enabled": shape.chief}, "evaluator": {"enabled": shape.evaluator},
            "mode": "in-graph" if in_graph else "between-graph",
            "code": {"args": ["--steps", "5"]}}


@pytest.mark.parametrize("shape, in_graph", SHAPES)
def test_local_plan_is_the_charts(shape, in_graph):
    ports = list(range(30000, 30100))
    mine = localrun.plan(shape, "demo", in_graph, ports=ports, namespace="team-a")
    chart, args = topology(chart_values(shape, in_graph), "demo", "team-a", ports)
    assert [(t.name, t.mode) for t in mine] == [(t.name, t.mode) for t in chart]
    assert [t.tf_config for t in mine] == [t.tf_config for t in chart]
    assert args == ["--steps", "5"]
    hosts = {h for t in mine for hs in t.tf_config["cluster"].values() for h in hs}
    servers = [t for t in mine if not t.name.startswith("evaluator")]  # it serves nothing
    assert len(hosts) == len(servers) and all(h.startswith("127.0.0.1:") for h in hosts)


def test_modes_and_completion_rule():
    assert localrun.task_mode("ps", False) == SERVER
    assert localrun.task_mode("worker", True) == SERVER
    assert localrun.task_mode("worker", False) == SCRIPT
    assert localrun.task_mode("chief", True) == SCRIPT
    assert localrun.task_mode("evaluator", True) == SCRIPT
    with_chief = localrun.plan(spec.Shape(2, 1, chief=True, evaluator=True), "x", True)
    assert localrun.done_condition(with_chief) == ["chief-0"]
    workers = localrun.plan(spec.Shape(3, 1, evaluator=True), "x")
    assert localrun.done_condition(workers) == ["worker-0", "worker-1", "worker-2"]


def test_in_graph_needs_a_chief():
    with pytest.raises(localrun.LocalRunError, match="--in-graph needs --chief"):
        localrun.plan(spec.Shape(2, 1), "x", in_graph=True)


def test_free_ports_are_distinct():
    ports = localrun.free_ports(20)
    assert len(set(ports)) == 20


# --- lifecycle, with a launcher whose servers need no TensorFlow -----------------------------

FAKE_LAUNCHER = '''
import os, signal, sys, time
sys.path.insert(0, {repo!r})
from tfhelm.pod import launcher, serve as served  # the real one, its server mode replaced
from tfhelm.pod.tfconfig import task_label

def serve(config):
    if os.environ.get("FAKE_SERVER_FAILS") == task_label(config):
        print("server failing", flush=True)
        return 1
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    print("serving", task_label(config), flush=True)
    while not stop:
        time.sleep(0.02)
    os._exit(128 + signal.SIGTERM)  # as the real launcher does

served.serve = serve
sys.exit(launcher.main())
'''

# Each script task does what BEHAVIOUR says for it: exit with a code, or hang.
BEHAVE = '''
import json, os, sys, time
me = os.environ["TFHELM_TASK_TYPE"] + "-" + os.environ["TFHELM_TASK_INDEX"]
what = json.loads(sys.argv[1]).get(me, 0)
print("task", me, "does", what, flush=True)
if what == "hang":
    time.sleep(3600)
time.sleep(0.1)
sys.exit(what)
'''


@pytest.fixture
def fake(tmp_path):
    launcher = tmp_path / "fake_launcher.py"
    launcher.write_text(FAKE_LAUNCHER.format(repo=str(Path(__file__).resolve().parents[2])))
    script = tmp_path / "behave.py"
    script.write_text(BEHAVE)
    return launcher, script


def run_fake(fake, tmp_path, shape, behaviour, in_graph=False, env=None, **kw):
    import json

    launcher, script = fake
    lines = []
    result = localrun.run(localrun.plan(shape, "fake", in_graph), str(script),
                          [json.dumps(behaviour)], localrun.RunDirs(tmp_path / "run"),
                          sink=lambda t, l: lines.append((t, l)), launcher=launcher,
                          base_env={**os.environ, **(env or {})}, timeout=60, **kw)
    return result, lines


def test_between_graph_done_when_all_workers_exit(fake, tmp_path):
    result, lines = run_fake(fake, tmp_path, spec.Shape(2, 2), {})
    assert result.exit_code == 0 and result.completed
    assert sorted(result.stopped) == ["ps-0", "ps-1"]  # servers stopped by us
    assert result.returncodes == {"worker-0": 0, "worker-1": 0, "ps-0": 143, "ps-1": 143}
    assert ("worker-1", "task worker-1 does 0") in lines
    assert ("ps-0", "serving ps:0") in lines
    cluster = (tmp_path / "run" / "cluster-spec.json").read_text()
    assert "127.0.0.1:" in cluster


def test_chief_decides_and_stragglers_get_a_grace_period(fake, tmp_path):
    result, _ = run_fake(fake, tmp_path, spec.Shape(2, 1, chief=True, evaluator=True),
                         {"worker-1": "hang", "evaluator-0": "hang"}, grace=0.5)
    assert result.exit_code == 0 and result.completed
    assert set(result.stopped) == {"worker-1", "evaluator-0", "ps-0"}
    assert result.returncodes["chief-0"] == 0 and result.returncodes["worker-0"] == 0
    assert result.returncodes["worker-1"] == 128 + signal.SIGTERM  # the launcher passed SIGTERM on


def test_in_graph_workers_are_servers_stopped_after_the_chief(fake, tmp_path):
    result, lines = run_fake(fake, tmp_path, spec.Shape(2, 1, chief=True), {}, in_graph=True)
    assert result.exit_code == 0 and result.completed
    assert sorted(result.stopped) == ["ps-0", "worker-0", "worker-1"]
    assert ("worker-1", "serving worker:1") in lines


def test_a_failed_training_task_stops_everything(fake, tmp_path):
    result, lines = run_fake(fake, tmp_path, spec.Shape(3, 1), {"worker-1": 3, "worker-0": "hang",
                                                                "worker-2": "hang"})
    assert result.exit_code == 3 and not result.completed
    assert result.failed == ["worker-1"]
    assert {"worker-0", "worker-2", "ps-0"} <= set(result.stopped)
    assert ("tfhelm", "worker-1 exited with status 3; stopping the others") in lines


def test_a_dead_server_fails_the_run(fake, tmp_path):
    result, _ = run_fake(fake, tmp_path, spec.Shape(1, 1), {"worker-0": "hang"},
                         env={"FAKE_SERVER_FAILS": "ps:0"})
    assert result.exit_code == 1 and result.failed == ["ps-0"]
    assert "worker-0" in result.stopped


def test_tf_config_through_the_spec_file_only(fake, tmp_path):
    """As in the chart for huge clusters: no TF_CONFIG in the env, the launcher composes it."""
    result, lines = run_fake(fake, tmp_path, spec.Shape(2, 1), {}, inline_tf_config=False)
    assert result.exit_code == 0
    assert ("ps-0", "serving ps:0") in lines


def test_sigint_stops_every_process(fake, tmp_path):
    pids = []
    before = set(children(os.getpid()))  # e.g. the cluster tier's control plane
    handler = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest was started in the background

    def interrupt():
        time.sleep(1.0)
        pids.extend(set(children(os.getpid())) - before)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    result, lines = run_fake(fake, tmp_path, spec.Shape(2, 1, chief=True),
                             {"chief-0": "hang", "worker-0": "hang", "worker-1": "hang"})
    assert result.interrupted and result.exit_code == 130
    assert len(pids) == 4
    assert alive(pids) == []
    assert ("tfhelm", "SIGINT: stopping every task") in lines
    assert signal.getsignal(signal.SIGINT) is handler  # restored


def test_missing_script_is_a_usage_error(tmp_path):
    with pytest.raises(localrun.LocalRunError, match="does not exist"):
        localrun.run(localrun.plan(spec.Shape(1), "x"), str(tmp_path / "nope.py"), [],
                     localrun.RunDirs(tmp_path))
