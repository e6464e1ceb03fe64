"""The three examples on the topology the chart renders: they train, checkpoint, resume.

Each test renders the chart (`helm template`) for the example's shape, takes every pod's
TF_CONFIG and launcher command from the manifests, maps the hosts to loopback ports and runs
the processes. A first run dies right after a checkpoint (`--crash-after-checkpoint`, the
chart's `code.args`); the second must carry on from that checkpoint, finish, and end the
way the reaper expects: training tasks exit 0 by themselves, servers are stopped by us
(SIGTERM; the launcher then exits 143, as a process killed by SIGTERM would).
"""

from __future__ import annotations

import math

import pytest

from tfhelm.cluster import localrun
from tfhelm.cluster.localrun import SCRIPT, SERVER

from .helpers import (EXAMPLES, TASK_ENV, Collect, events, latest_checkpoint_step, metrics,
                      scalars, topology)

pytestmark = pytest.mark.needs_tf

STEPS, EVERY, CRASH = 60, 20, 20
ARGS = ["--steps", str(STEPS), "--checkpoint-every", str(EVERY),
        "--crash-after-checkpoint", str(CRASH)]
STOPPED = 143  # a server task's status once SIGTERM stopped it
TIMEOUT = 300  # seconds; only a guard against hangs, never a performance assertion


def run(values, script, dirs, sink, **kw):
    tasks, args = topology(values)
    assert args == ARGS  # the chart passes the script its arguments
    return tasks, localrun.run(tasks, str(EXAMPLES / script), args, dirs, sink=sink,
                               base_env=TASK_ENV, timeout=TIMEOUT, **kw)


def assert_trained(lines, first_step=None):
    steps = events(lines, "step")
    assert steps, "no training step was recorded"
    assert all(math.isfinite(e["loss"]) and e["loss"] > 0 for e in steps)
    return steps


def test_between_graph_with_parameter_servers(tmp_path):
    values = {"worker": {"replicas": 2}, "ps": {"replicas": 1}, "mode": "between-graph",
              "code": {"args": ARGS}}
    dirs = localrun.RunDirs(tmp_path)
    sink = Collect()

    tasks, first = run(values, "ps_between_graph.py", dirs, sink)
    assert {t.name: t.mode for t in tasks} == {"worker-0": SCRIPT, "worker-1": SCRIPT,
                                               "ps-0": SERVER}
    # Worker 0 is the chief: it died right after a checkpoint; everything was stopped.
    assert first.exit_code == 3 and first.failed == ["worker-0"] and not first.completed
    saved = latest_checkpoint_step(dirs.checkpoints)
    assert saved is not None and saved >= CRASH
    assert_trained(metrics(dirs.log, "worker-0"))

    # A new cluster (new PS too, so nothing survives in memory) resumes from the checkpoint.
    _, second = run(values, "ps_between_graph.py", dirs, sink)
    assert second.exit_code == 0 and second.completed
    assert second.returncodes == {"worker-0": 0, "worker-1": 0, "ps-0": STOPPED}
    assert second.stopped == ["ps-0"]  # the PS never exits by itself
    chief = metrics(dirs.log, "worker-0")
    starts = [e["step"] for e in events(chief, "start")]
    # Asynchronous training: the other worker may add a step while the checkpoint named
    # after step N is being written, so the restored step is N or a little more. Never 0.
    assert len(starts) == 2 and starts[0] == 0 and starts[1] >= saved > 0
    assert events(chief, "done")[-1]["step"] >= STEPS
    assert events(metrics(dirs.log, "worker-1"), "done")  # the other worker trained too
    assert latest_checkpoint_step(dirs.checkpoints) >= STEPS
    summaries = scalars(dirs.log / "train")
    assert summaries["loss"] and max(s for s, _ in summaries["loss"]) >= saved


def test_collective_multi_worker_mirrored(tmp_path):
    values = {"worker": {"replicas": 2}, "ps": {"replicas": 0}, "code": {"args": ARGS}}
    dirs = localrun.RunDirs(tmp_path)
    sink = Collect()

    tasks, first = run(values, "collective.py", dirs, sink)
    assert {t.name: t.mode for t in tasks} == {"worker-0": SCRIPT, "worker-1": SCRIPT}
    assert first.exit_code == 3 and not first.completed
    assert latest_checkpoint_step(dirs.checkpoints) == CRASH
    assert_trained(metrics(dirs.log, "worker-0"))

    _, second = run(values, "collective.py", dirs, sink)
    assert second.exit_code == 0 and second.completed and second.stopped == []
    assert second.returncodes == {"worker-0": 0, "worker-1": 0}
    for task in ("worker-0", "worker-1"):  # synchronous: both did every step
        lines = metrics(dirs.log, task)
        assert [e["step"] for e in events(lines, "start")] == [0, CRASH]
        assert [e["step"] for e in events(lines, "step")] == [20, 40, 60]
    # Identical replicas: both workers saw the same all-reduced loss.
    losses = [[e["loss"] for e in events(metrics(dirs.log, t), "step")]
              for t in ("worker-0", "worker-1")]
    assert losses[0] == pytest.approx(losses[1])
    assert latest_checkpoint_step(dirs.checkpoints) == STEPS
    assert not list(dirs.checkpoints.glob(".tmp-*"))  # non-chief copies cleaned up
    assert [s for s, _ in scalars(dirs.log / "train")["loss"]] == [20, 40, 60]


def test_in_graph_chief_restarts_against_running_servers(tmp_path):
    """As on Kubernetes: the chief's pod dies and its Job retries it, while the PS and worker
    servers (and the evaluator) keep running; the new chief restores the checkpoint."""
    values = {"worker": {"replicas": 2}, "ps": {"replicas": 1}, "chief": {"enabled": True},
              "evaluator": {"enabled": True}, "mode": "in-graph", "code": {"args": ARGS}}
    tasks, args = topology(values)
    assert args == ARGS
    assert {t.name: t.mode for t in tasks} == {
        "chief-0": SCRIPT, "worker-0": SERVER, "worker-1": SERVER, "ps-0": SERVER,
        "evaluator-0": SCRIPT}
    # The evaluator runs no server: the chart keeps it out of every task's cluster.
    assert not any("evaluator" in t.tf_config["cluster"] for t in tasks)
    dirs = localrun.RunDirs(tmp_path)
    sink = Collect()
    cluster = localrun.LoopbackCluster(tasks, str(EXAMPLES / "ps_in_graph.py"), args, dirs,
                                    sink=sink, base_env=TASK_ENV, grace=60)
    cluster.start()
    try:
        assert cluster.procs["chief-0"].wait(TIMEOUT) == 3
        servers = ["worker-0", "worker-1", "ps-0"]
        assert [n for n in servers if cluster.procs[n].poll() is not None] == []
        assert latest_checkpoint_step(dirs.checkpoints) == CRASH
        cluster.start_task(next(t for t in tasks if t.name == "chief-0"))  # the Job's retry
        result = cluster.wait(timeout=TIMEOUT)
    finally:
        cluster.close()

    assert result.exit_code == 0 and result.completed
    assert result.returncodes == {"chief-0": 0, "evaluator-0": 0, "worker-0": STOPPED,
                                  "worker-1": STOPPED, "ps-0": STOPPED}
    assert sorted(result.stopped) == sorted(servers)
    chief = metrics(dirs.log, "chief-0")
    assert [e["step"] for e in events(chief, "start")] == [0, CRASH]
    assert [e["step"] for e in assert_trained(chief)] == [20, 40, 60]
    assert latest_checkpoint_step(dirs.checkpoints) == STEPS
    assert [s for s, _ in scalars(dirs.log / "train")["loss"]] == [20, 40, 60]
    evaluated = events(metrics(dirs.log, "evaluator-0"), "eval")
    assert evaluated and evaluated[-1]["step"] == STEPS
    assert scalars(dirs.log / "eval")["accuracy"][-1][0] == STEPS
