"""What the chart gives the programs users bring: the Jobs' failure policy (fail fast, retry
faults), the Keras choice, a run's extra packages installed once, and the launcher copy the
pods run."""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tfhelm.cluster.manifests import by_kind
from tfhelm.errors import RenderError

from .conftest import helm, pod_specs, render

REPO = Path(__file__).resolve().parents[2]
ALL_ROLES = {"chief": {"enabled": True}, "evaluator": {"enabled": True}}


def jobs(values: dict) -> dict[str, dict]:
    return {j["metadata"]["labels"]["tfhelm.io/role"]: j["spec"] for j in by_kind(render(values), "Job")}


def env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_every_job_fails_a_task_at_once_on_the_scripts_error_and_retries_faults():
    """TFJob's ExitCode policy as a podFailurePolicy: disruptions are not counted, 75 (a
    TensorFlow error a restart cures), 137 and 143 are retried, any other exit fails the index."""
    for role, job in jobs(ALL_ROLES).items():
        assert job["podFailurePolicy"] == {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Count", "onExitCodes": {"operator": "In", "values": [75, 137, 143]}},
            {"action": "FailIndex", "onExitCodes": {"operator": "NotIn", "values": [75, 137, 143]}},
        ]}, role
        assert job["backoffLimitPerIndex"] == 3  # FailIndex needs per-index backoff
    assert jobs({})["worker"]["maxFailedIndexes"] == 0  # one task failed for good ends the training
    assert "maxFailedIndexes" not in jobs({"worker": {"maxFailedIndexes": None}})["worker"]
    assert jobs({"worker": {"replicas": 4, "maxFailedIndexes": 9}})["worker"]["maxFailedIndexes"] == 4


def test_the_failure_policy_is_configurable():
    custom = jobs({"failurePolicy": {"retryExitCodes": [143, 1, 137]}})["worker"]["podFailurePolicy"]
    assert [r["onExitCodes"]["values"] for r in custom["rules"][1:]] == [[1, 137, 143]] * 2  # sorted
    retry_all = jobs({"failurePolicy": {"mode": "retryAll"}})["worker"]["podFailurePolicy"]
    assert retry_all == {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    assert "podFailurePolicy" not in jobs({"failurePolicy": {"mode": "retryAll", "ignoreDisruptions": False}})["worker"]
    pods = pod_specs(render({"failurePolicy": {"retryErrors": ["UnavailableError", "ConnectionError"]}}))
    assert env(pods["mnist-worker"]["containers"][0])["TFHELM_RETRY_ERRORS"] == "UnavailableError,ConnectionError"


def test_job_numbers_set_on_the_command_line_reach_the_job(tf_chart):
    """`--set` gives Helm int64 numbers, a values file float64: both count (backoffLimit from
    --set was dropped before)."""
    out = helm("template", "x", tf_chart, "--set", "worker.backoffLimit=3", "--set", "worker.maxFailedIndexes=1",
               "--set", "worker.replicas=2", "--set", "worker.ttlSecondsAfterFinished=0",
               "--show-only", "templates/worker/job.yaml").stdout
    for line in ("backoffLimit: 3", "maxFailedIndexes: 1", "ttlSecondsAfterFinished: 0"):
        assert f"\n  {line}\n" in out, line


def test_every_container_tells_kubernetes_why_it_failed():
    m = render({**ALL_ROLES, "code": {"source": "url", "url": "http://files/t.py", "script": "t.py",
                                      "packages": ["six==1.16.0"]}})
    for name, pod in pod_specs(m).items():
        for c in pod["containers"] + pod.get("initContainers", []):
            assert c["terminationMessagePolicy"] == "FallbackToLogsOnError", (name, c["name"])
        assert env(pod["containers"][0])["TFHELM_TERMINATION_LOG"] == "/dev/termination-log"


@pytest.mark.parametrize("keras, legacy", [("2", "1"), (2, "1"), ("3", "0"), (3, "0"), ("auto", None)])
def test_keras_choice_reaches_every_task(keras, legacy):
    """Keras 2 code needs TF_USE_LEGACY_KERAS=1 in every task before TensorFlow is imported."""
    pods = pod_specs(render({**ALL_ROLES, "keras": keras}))
    assert len(pods) == 4
    for name, pod in pods.items():
        assert env(pod["containers"][0]).get("TF_USE_LEGACY_KERAS") == legacy, name


def packages_setup(values: dict) -> tuple[dict, dict]:
    """(install-packages init container by pod, PYTHONUSERBASE by pod) of the rendered pods."""
    pods = pod_specs(render(values))
    inits = {n: next((c for c in p.get("initContainers", []) if c["name"] == "install-packages"), None)
             for n, p in pods.items()}
    bases = {n: env(p["containers"][0]).get("PYTHONUSERBASE") for n, p in pods.items()}
    return inits, bases


def test_extra_packages_are_installed_once_per_run_and_used_from_the_pods_own_copy():
    """Installed once per run (its Job's uid) into the shared data volume, in a directory named
    by what goes in; each task checks it and copies it into its pod's /tmp, which its Python
    reads (tfhelm/pod/packages.py)."""
    values = {**ALL_ROLES, "code": {"packages": ["pandas==2.2.3", "tqdm"],
                                    "pip": {"findLinks": "http://files.team-a.svc:8080/wheels/"}}}
    inits, bases = packages_setup(values)
    assert inits["mnist-ps-0"] is None and bases["mnist-ps-0"] is None  # PS run no script
    targets = {init["command"][3] for n, init in inits.items() if init}
    (target,) = targets  # one directory for every task, per run: the first installs, the others find it done
    assert target.startswith("/data/.tfhelm/packages/") and target.endswith("/$(TFHELM_RUN)")
    assert {bases[n] for n in inits if inits[n]} == {"/tmp/packages"}
    init = inits["mnist-worker"]
    assert init["command"] == ["python3", "/etc/tfhelm/launcher.py", "packages", target, "/tmp/packages",
                               "--no-index", "--find-links", "http://files.team-a.svc:8080/wheels/", "--",
                               "pandas==2.2.3", "tqdm"]
    assert env(init)["TFHELM_RUN"] is None  # from the downward API:
    assert init["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['batch.kubernetes.io/controller-uid']")
    assert {"name": "data", "mountPath": "/data"} in init["volumeMounts"]
    assert {"name": "tmp", "mountPath": "/tmp"} in init["volumeMounts"]
    assert init["image"] == pod_specs(render(values))["mnist-worker"]["containers"][0]["image"]
    # Another list, other pip settings or another image: another directory.
    for change in ({"code": {"packages": ["pandas==2.2.2", "tqdm"]}},
                   {"code": {**values["code"], "pip": {"indexUrl": "https://pypi.internal/simple"}}},
                   {"image": {"tag": "2.21.0-gpu"}}):
        other, _ = packages_setup({**values, **change})
        assert other["mnist-worker"]["command"][3] != target, change
    in_graph, _ = packages_setup({**values, "mode": "in-graph"})
    assert in_graph["mnist-worker"] is None and in_graph["mnist-chief"]  # in-graph workers only serve
    assert packages_setup({})[0]["mnist-worker"] is None


def test_an_index_with_a_wheel_directory_keeps_the_index():
    inits, _ = packages_setup({"code": {"packages": ["x"], "pip": {"indexUrl": "https://pypi.internal/simple",
                                                                    "findLinks": "/data/wheels"}}})
    assert inits["mnist-worker"]["command"][5:] == [
        "--index-url", "https://pypi.internal/simple", "--find-links", "/data/wheels", "--", "x"]


@pytest.mark.parametrize("values, message", [
    ({"keras": "4"}, "keras:"),
    ({"code": {"packages": ["--index-url=http://evil/"]}}, "code.packages.0:"),
    ({"code": {"pip": {"findLinks": "wheels"}}}, "code.pip.findLinks:"),
    ({"failurePolicy": {"mode": "never"}}, "failurePolicy.mode:"),
    ({"failurePolicy": {"retryExitCodes": []}}, "failurePolicy.retryExitCodes:"),
    ({"failurePolicy": {"retryExitCodes": [256]}}, "failurePolicy.retryExitCodes.0:"),
    ({"worker": {"maxFailedIndexes": -1}}, "worker.maxFailedIndexes:"),
])
def test_schema_rejects_bad_program_settings(values, message):
    with pytest.raises(RenderError, match=message):
        render(values)


def _chart_files():
    spec = importlib.util.spec_from_file_location("chart_files", REPO / "hack" / "chart-files.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_programs_pods_run_are_the_documented_ones_without_their_prose():
    """Each chart's copy of a program (files/task/, files/reaper/, user-env's files/authproxy/)
    is generated from tfhelm/ (`make chart-files`): every module its entry imports, without
    prose (a fraction of the bytes every release stores), the contract as JSON, nothing else."""
    module = _chart_files()
    for directory, files in module.expected().items():
        assert {p.name for p in directory.iterdir()} == set(files), f"{directory} is stale: run `make chart-files`"
        for name, content in files.items():
            assert (directory / name).read_text() == content, f"{directory / name} is stale: run `make chart-files`"
        shipped = [n for n in files if n.startswith("tfhelm.")]
        for directory in module.CONTRACT_COPIES:
            assert (directory / "contract.json").read_text() == module.contract_json(), "run `make chart-files`"
        source = sum(module.source_path(n.removesuffix(".py")).stat().st_size for n in shipped)
        assert sum(len(files[n]) for n in shipped) < 0.9 * source


def test_the_programs_import_the_standard_library_alone(tmp_path):
    """What the chart ships runs where tfhelm is not installed (python3 -I: no site-packages):
    the launcher, the reaper and TensorBoard's login proxy each start from their directory as
    the pod mounts it."""
    module = _chart_files()
    for directory in module.PROGRAMS:
        mounted = tmp_path / directory.name
        mounted.mkdir()
        for name, content in module.complete(directory).items():
            (mounted / name).write_text(content)
        for entry in (n for n in module.PROGRAMS[directory]):
            done = subprocess.run([sys.executable, "-I", str(mounted / entry), "--help"], capture_output=True,
                                  text=True, timeout=60, cwd="/")
            assert "Traceback" not in done.stderr and "usage" in done.stdout + done.stderr, (entry, done.stderr)
    with pytest.raises(ValueError, match="standard library only"):
        module.closure(["tfhelm.kube"])


def test_stripping_keeps_the_program():
    strip = _chart_files().strip
    source = ('"""Module doc."""\nimport os  # why\n\n\nclass E(Exception):\n    """Only a doc."""\n\n\n'
              'def f(x):\n    """Doc\n    on lines."""\n    s = """keep\n\n  # this\n"""  # not this\n'
              '    return s + "#" + x\n')
    out = strip(source)
    assert out == ('import os\nclass E(Exception):\n    pass\ndef f(x):\n    s = """keep\n\n  # this\n"""'
                   '  # not this\n    return s + "#" + x\n')
    namespace: dict = {}
    exec(compile(out, "stripped", "exec"), namespace)
    assert namespace["f"]("y") == 'keep\n\n  # this\n#y'
    ast.parse(out)


def test_the_image_recipe_builds_on_the_tensorflow_we_test():
    """examples/images/tensorflow/Dockerfile: the public image of the TensorFlow the tests use,
    with tf-keras of the same major.minor installed without dependencies."""
    recipe = (REPO / "examples" / "images" / "tensorflow" / "Dockerfile").read_text()
    pinned = next(line.split(":=")[1].strip() for line in (REPO / "mk" / "versions.mk").read_text().splitlines()
                  if line.startswith("TENSORFLOW_VERSION"))
    assert f"ARG TF_VERSION={pinned}\n" in recipe
    assert 'pip install --no-cache-dir --no-deps "tf-keras==${minor}.*"' in recipe
    assert "FROM tensorflow/tensorflow:${TF_VERSION}" in recipe
