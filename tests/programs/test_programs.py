"""Programs as users write them (tests/programs/scripts/), unchanged, on the real node: each
through `tfhelm up --wait` and through plain `helm install`, trained to the end in one attempt
per task, with what each program leaves behind (checkpoints, saved models, evaluations).
Then the kill of a worker in the middle of a Keras 2 MultiWorkerMirroredStrategy training:
the killed task and its peer are retried, and BackupAndRestore resumes the epochs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tfhelm_dev import localnode
from tfhelm.chart import chart_path

from tests.cluster.conftest import job_of
from tests.cluster.test_localcluster import job_condition

from .conftest import pod_logs, run, volume_dir, wait_for

SCRIPTS = Path(__file__).parent / "scripts"
SMALL = {"storage": {"data": {"size": "64Mi"}, "logs": {"size": "64Mi"}}}


@dataclass
class Program:
    script: str
    up: list[str]  # its shape as `tfhelm up` options
    values: dict  # the same as chart values, for `helm install`
    done: dict[str, str]  # role -> the line every task of that role prints at its end
    artifacts: list[str]  # what it leaves under its model directory
    decides: str = "worker"  # the role whose Job decides the training
    args: list[str] = field(default_factory=list)


PROGRAMS = {
    "keras2-ps-fit": Program(
        "keras2_ps_fit.py", ["--chief", "--in-graph", "--workers", "2", "--ps", "1", "--evaluator", "--keras", "2"],
        {"mode": "in-graph", "chief": {"enabled": True}, "evaluator": {"enabled": True}, "keras": "2",
         "worker": {"replicas": 2}, "ps": {"replicas": 1}},
        {"chief": "chief done: loss", "evaluator": "evaluator done: evaluated the checkpoint of epoch 3"},
        ["checkpoints/ckpt-3.index", "checkpoints/checkpoint"], decides="chief"),
    "keras2-mwms-fit": Program(
        "keras2_mwms_fit.py", ["--workers", "2", "--ps", "0"], {"worker": {"replicas": 2}, "ps": {"replicas": 0}},
        {"worker": " done; model "}, ["saved_model/saved_model.pb", "tb/train"]),
    "keras3-ctl": Program(
        "keras3_custom_loop.py", ["--workers", "2", "--ps", "0", "--keras", "3"],
        {"worker": {"replicas": 2}, "ps": {"replicas": 0}, "keras": "3"},
        {"worker": " done after 3 epochs"}, ["model.keras", "checkpoints/checkpoint"]),
    "tf1-graph": Program(
        "tf1_graph.py", ["--workers", "2", "--ps", "1"], {"worker": {"replicas": 2}, "ps": {"replicas": 1}},
        {"worker": " done"}, ["checkpoint", "graph.pbtxt"]),
}


def model_args(program: Program, cluster: str) -> list[str]:
    flag = "--train-dir" if program.script == "tf1_graph.py" else "--model-dir"
    return [flag, f"/log/{cluster}/model", *program.args]


def check_trained(core, batch, ns: str, cluster: str, program: Program) -> None:
    """Every Job of the cluster Complete, every task in one attempt, each task's last line
    printed, the program's files on the logs volume, and all of it on the real training nodes."""
    for role in ("chief", "worker", "evaluator"):
        if role not in program.done and role != program.decides:
            continue
        name = job_of(ns, cluster, role)
        state = wait_for(lambda: job_condition(batch, ns, name), 600, interval=2, what=f"the {role} Job to finish")
        logs = pod_logs(core, ns, f"tfhelm.io/cluster={cluster},tfhelm.io/role={role}")
        assert state == "Complete", logs
        job = batch.read_namespaced_job(name, ns)
        assert not job.status.failed, (role, logs)  # one attempt: nothing was retried
        if role in program.done:
            assert logs and all(program.done[role] in text for text in logs.values()), logs
    model = volume_dir(core, ns, f"{cluster}-logs") / cluster / "model"
    for artifact in program.artifacts:
        assert (model / artifact).exists(), sorted(str(p.relative_to(model)) for p in model.rglob("*"))
    pods = core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster={cluster}").items
    assert pods and {p.spec.node_name for p in pods} <= set(localnode.TRAINING_NODES)  # never the user node


@pytest.mark.parametrize("name", PROGRAMS)
def test_through_tfhelm_up(name, namespace, core, api_client):
    program = PROGRAMS[name]
    ps = "--ps" in program.up and program.up[program.up.index("--ps") + 1] != "0"
    out = run("tfhelm", "up", "--name", name, "-n", namespace, *program.up, "--script", str(SCRIPTS / program.script),
              "--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi", "--wait",
              *(["--reap", "--set", "reaper.grace=1"] if ps else []), "--", *model_args(program, name))
    assert "training complete" in out.stderr, out.stderr
    check_trained(core, client.BatchV1Api(api_client), namespace, name, program)


@pytest.mark.parametrize("name", PROGRAMS)
def test_through_helm_install(name, namespace, core, api_client):
    program = PROGRAMS[name]
    values = {**program.values, **SMALL, "code": {
        "source": "inline", "script": program.script, "inline": (SCRIPTS / program.script).read_text(),
        "args": model_args(program, name)}}
    run("helm", "install", name, str(chart_path()), "-n", namespace, "-f", "-", stdin=yaml.safe_dump(values))
    check_trained(core, client.BatchV1Api(api_client), namespace, name, program)


def test_a_killed_worker_is_retried_and_keras_resumes_from_its_backup(namespace, core, api_client):
    """SIGKILL (what the out-of-memory killer sends) to worker 1's script in mid-training:
    exit 137, retried; worker 0 loses its peer (TensorFlow's UnavailableError), which the
    launcher turns into exit 75, retried too; both come back and BackupAndRestore goes on
    from the last epoch it backed up. The training completes."""
    batch = client.BatchV1Api(api_client)
    name = "mwms-kill"
    run("tfhelm", "up", "--name", name, "-n", namespace, "--workers", "2", "--ps", "0",
        "--script", str(SCRIPTS / "keras2_mwms_fit.py"), "--set", "storage.data.size=64Mi",
        "--set", "storage.logs.size=64Mi", "--", "--model-dir", f"/log/{name}/model",
        "--epochs", "40", "--steps-per-epoch", "25")
    backup = volume_dir(core, namespace, f"{name}-logs") / name / "model" / "backup"
    wait_for(lambda: list(backup.rglob("checkpoint")), 600, interval=0.5, what="the first epoch's backup")
    worker_1 = wait_for(lambda: [p for p in core.list_namespaced_pod(
        namespace, label_selector=f"tfhelm.io/cluster={name},batch.kubernetes.io/job-completion-index=1").items
        if p.status.phase == "Running"], 60, what="worker 1 running")[0].metadata.name
    run("kubectl", "exec", "-n", namespace, worker_1, "-c", "tensorflow", "--",
        "sh", "-c", "kill -KILL $(cat /proc/1/task/1/children)")  # the script, the launcher's child

    workers = job_of(namespace, name, "worker")
    state = wait_for(lambda: job_condition(batch, namespace, workers), 900, interval=2, what="the worker Job")
    logs = pod_logs(core, namespace, f"tfhelm.io/cluster={name}")
    assert state == "Complete", logs
    pods = core.list_namespaced_pod(namespace, label_selector=f"tfhelm.io/cluster={name}").items
    failed = {p.metadata.name: p.status.container_statuses[0].state.terminated for p in pods
              if p.status.phase == "Failed"}
    codes = sorted(t.exit_code for t in failed.values())
    assert 137 in codes and set(codes) <= {75, 137}, {n: (t.exit_code, t.message) for n, t in failed.items()}
    assert failed[worker_1].message.strip() == "killed by SIGKILL (out of memory, or killed)"
    (again,) = [p.metadata.name for p in pods if p.status.phase == "Succeeded"
                and p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "1"]
    epochs = [int(line.split()[1].split("/")[0]) for line in logs[again].splitlines() if line.startswith("Epoch ")]
    assert epochs and epochs[0] > 1 and epochs[-1] == 40, logs[again]  # resumed, then went to the end
    assert (volume_dir(core, namespace, f"{name}-logs") / name / "model" / "saved_model" / "saved_model.pb").exists()
