"""On the real node: a task whose script fails deterministically fails at once (one attempt)
with its own error line in `tfhelm status` and `up --wait`; a run's extra packages come from a
wheel directory, installed once for all its tasks, and one that cannot be installed fails the
same way; Keras 2 on an image without tf-keras says so in one line. A deleted task stops on
SIGTERM (the launcher passes it to the script), and `up --replace` starts the new tasks only
once the old ones are gone."""

from __future__ import annotations

import re
import time

from kubernetes import client, watch

from tests.cluster.conftest import job_of
from tests.helpers.wheels import make_wheel

from .conftest import TASKS, pod_logs, run, volume_dir, wait_for

SMALL = ["--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi"]


def cluster_pods(core, ns: str, cluster: str, extra: str = "") -> list:
    """The TF tasks' pods (not the in-cluster reaper's, which every cluster has)."""
    return core.list_namespaced_pod(ns, label_selector=f"tfhelm.io/cluster={cluster},{TASKS}{extra}").items


def one_attempt_each(core, ns: str, cluster: str) -> bool:
    """No task was retried: one pod per completion index (a task the failed Job stopped
    before it failed by itself is deleted, so there may be fewer pods than tasks)."""
    indexes = [p.metadata.annotations["batch.kubernetes.io/job-completion-index"]
               for p in cluster_pods(core, ns, cluster)]
    return bool(indexes) and len(indexes) == len(set(indexes))


def test_an_error_fails_at_once_with_its_line_and_extra_packages_fix_it(namespace, core, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text("import tfhelm_probe\nprint('the answer is', tfhelm_probe.ANSWER)\n")
    up = ["tfhelm", "up", "--name", "pr", "-n", namespace, "--workers", "2", "--ps", "0", "--script", str(script),
          *SMALL, "--wait", "--timeout", "600"]

    # The module is not in the image: the task fails in its first attempt, and says why (the
    # other one fails the same way, or is stopped once the Job failed: maxFailedIndexes 0).
    failed = run(*up, code=1)
    line = re.compile(r"error of worker:[01](, worker:1)?: ModuleNotFoundError: No module named 'tfhelm_probe' \(exit 1\)")
    assert "training failed" in failed.stderr and line.search(failed.stderr), failed.stderr
    assert one_attempt_each(core, namespace, "pr")  # no retry: the error would come back
    shown = run("tfhelm", "status", "pr", "-n", namespace, code=1)
    assert line.search(shown.stdout), shown.stdout

    # The package from a wheel directory on the run's data volume: installed once, for both.
    make_wheel(volume_dir(core, namespace, "pr-data") / "wheels", "tfhelm_probe", "1.0", "ANSWER = 42\n")
    run(*up, "--replace", "--pip", "tfhelm_probe==1.0", "--pip-find-links", "/data/wheels")
    logs = pod_logs(core, namespace, "tfhelm.io/cluster=pr,tfhelm.io/role=worker")
    ran = {pod: text for pod, text in logs.items() if "the answer is 42" in text}
    assert len(ran) == 2, logs
    assert sum("installing tfhelm_probe==1.0" in text for text in ran.values()) == 1, ran
    assert sum("packages already installed" in text for text in ran.values()) == 1, ran

    # A package that cannot be installed: pip's error line, one attempt.
    bad = run(*up, "--replace", "--pip", "tfhelm_nosuch==1.0", "--pip-find-links", "/data/wheels", code=1)
    assert ("install-packages: pip could not install tfhelm_nosuch==1.0: ERROR: Could not find a version that "
            "satisfies the requirement tfhelm_nosuch==1.0") in bad.stderr, bad.stderr
    assert one_attempt_each(core, namespace, "pr")


def test_keras_2_on_an_image_without_tf_keras_is_one_line_and_no_retry(namespace, core, tmp_path):
    """A plain Python image: neither TensorFlow nor tf-keras."""
    script = tmp_path / "k2.py"
    script.write_text("print('never')\n")
    out = run("tfhelm", "up", "--name", "k2", "-n", namespace, "--workers", "1", "--ps", "0", "--keras", "2",
              "--image", "python:3.11-slim", "--script", str(script), *SMALL, "--wait",
              "--timeout", "600", code=1)
    assert ("error of worker:0: Keras 2 is asked for (TF_USE_LEGACY_KERAS=1, e.g. chart value keras: \"2\") "
            "but this image has no tf-keras") in out.stderr, out.stderr
    assert len(cluster_pods(core, namespace, "k2")) == 1


def test_a_deleted_task_stops_on_sigterm_and_replace_waits_for_the_old_tasks(namespace, core, api_client, tmp_path):
    """The script installs no SIGTERM handler and sleeps: as PID 1 it would ignore SIGTERM
    and die by SIGKILL at the end of the grace period (exit 137); the launcher passes it on."""
    script = tmp_path / "sleeper.py"
    script.write_text("import sys, time\nprint('ready', sys.argv[1:], flush=True)\ntime.sleep(3600)\n")
    up = ["tfhelm", "up", "--name", "st", "-n", namespace, "--workers", "2", "--ps", "0", "--script", str(script), *SMALL]
    run(*up, "--", "one")
    old_job = job_of(namespace, "st", "worker")

    def ready(job: str) -> list:
        pods = [p for p in cluster_pods(core, namespace, "st", f",job-name={job}") if p.status.phase == "Running"]
        logs = [core.read_namespaced_pod_log(p.metadata.name, namespace) for p in pods]
        return pods if len(pods) == 2 and all("ready" in text for text in logs) else []
    pod = wait_for(lambda: ready(old_job), 300, interval=1, what="both sleepers ready")[0].metadata.name
    # The TensorFlow image, as users type in it: `python`, and `pip` for a user (no root).
    for tool in (["python", "--version"], ["pip", "--version"]):
        run("kubectl", "exec", "-n", namespace, pod, "--", *tool)

    stream = watch.Watch().stream(core.list_namespaced_pod, namespace, field_selector=f"metadata.name={pod}",
                                  timeout_seconds=120)
    started = time.monotonic()
    core.delete_namespaced_pod(pod, namespace)
    final = stopped = None
    for event in stream:
        container = (event["object"].status.container_statuses or [None])[0]
        if container and container.state.terminated:
            final, stopped = container.state.terminated, stopped or time.monotonic() - started
        if event["type"] == "DELETED":
            break
    assert final and final.exit_code == 143  # the launcher's SIGTERM exit, not 137 (SIGKILL after the grace)
    # Measured, not asserted: the delete request to the container's end as the API shows it,
    # and to the pod's removal (the kubelet's and the Job controller's cleanup after it).
    print(f"deleted task: stopped after {stopped:.1f} s, pod gone after {time.monotonic() - started:.1f} s")

    # A change replaces the Job: when `up --replace` returns, no old task is left.
    wait_for(lambda: ready(old_job), 300, interval=1, what="the deleted task back (143 is retried)")
    started = time.monotonic()
    out = run(*up, "--replace", "--", "two")
    print(f"up --replace took {time.monotonic() - started:.1f} s")
    assert not cluster_pods(core, namespace, "st", f",job-name={old_job}"), "old tasks beside the new ones"
    assert f"deleted Job {namespace}/{old_job}; its pods are gone" in " ".join(out.stderr.split()), out.stderr
    new_job = job_of(namespace, "st", "worker")
    assert new_job != old_job
    wait_for(lambda: ready(new_job), 300, interval=1, what="the new tasks")
    assert not client.BatchV1Api(api_client).read_namespaced_job(new_job, namespace).status.failed
    run("tfhelm", "down", "st", "-n", namespace)
