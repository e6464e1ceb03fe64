"""Users share the cluster through their workspaces' queues (`tfhelm user add`, docs/queue.md):
each workspace has a ClusterQueue of its own in the cohort `tfhelm` with a nominal quota, and
borrows what the other leaves unused. Alice, over her nominal quota, runs on Bob's idle share;
when Bob trains, he takes his share back (Kueue preempts Alice's borrowing training), and Alice
resumes once Bob is done. Which priorities a workspace may use is the admin's choice: a tenant
asking for another is refused by the API server, whoever's tokens it uses."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from kubernetes import client

from tests.cluster.conftest import job_of
from tests.cluster.test_localcluster import job_condition
from tests.tf.helpers import events, metrics
from tfhelm.chart import chart_path
from tfhelm.workspace import userspec

from .conftest import (SMALL, check_no_queued_cluster_holds_a_node, condition, pod_logs, priority_class, run,
                       unique, volume_dir, wait_for, workload_of)
from .test_admission import inline_collective

NOMINAL = "1500m"


@pytest.fixture(scope="module")
def workspaces(kueue, api_client):
    """Alice and Bob, each with a queue of 1.5 CPU in the cohort `tfhelm`; Alice may use the
    priority `low` only. Purged at the end."""
    low, high = unique("low"), unique("high")
    classes = [priority_class(low, 100), priority_class(high, 1000)]
    run("kubectl", "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(classes))
    names = [unique("alice"), unique("bob")]
    for u in names:
        run("tfhelm", "user", "add", u, "--queue-cpu", NOMINAL, "--queue-memory", "8Gi",
            *(["--priority", low] if u.startswith("alice") else []), "--timeout", "300")
    yield names, low, high
    for u in names:
        run("tfhelm", "user", "remove", u, "--purge")
    run("kubectl", "delete", "--ignore-not-found", "-f", "-", stdin=yaml.safe_dump_all(classes))


def cq_usage(api_client, user: str) -> dict:
    """The ClusterQueue's CPU use of its flavor: total and borrowed (Kueue's status)."""
    cq = client.CustomObjectsApi(api_client).get_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", userspec.user_namespace(user))
    for f in (cq.get("status") or {}).get("flavorsUsage") or []:
        for r in f.get("resources") or []:
            if r["name"] == "cpu":
                return r
    return {}


def test_users_over_their_nominal_quota_share_the_cohort(workspaces, core, api_client, nodes, recorder, training_cpu):
    batch = client.BatchV1Api(api_client)
    (alice, bob), low, _ = workspaces
    ns_a, ns_b = userspec.user_namespace(alice), userspec.user_namespace(bob)
    # Alice asks for 2.4 CPU, over her 1.5: admitted on Bob's unused share.
    values = {**inline_collective("ta", "ignored"), "worker": {"replicas": 2, "resources": {"requests": {"cpu": "1200m"}}}}
    values.pop("queue")
    values["code"]["args"] = ["--steps", "600", "--checkpoint-every", "20"]
    run("tfhelm", "up", "--user", alice, "--name", "ta", "--priority", low, "-f", "/dev/stdin", *SMALL,
        stdin=yaml.safe_dump(values))
    ta = job_of(ns_a, "ta", "worker")
    assert batch.read_namespaced_job(ta, ns_a).metadata.labels["kueue.x-k8s.io/queue-name"] == "training", \
        "up --user queues in the workspace's LocalQueue"
    ta_uid = batch.read_namespaced_job(ta, ns_a).metadata.uid
    wait_for(lambda: condition(workload_of(api_client, ns_a, ta_uid), "Admitted"), 300, what="Alice's training admitted")
    # Kueue writes the ClusterQueue's usage after the Workload's admission: wait for it.
    usage = wait_for(lambda: (lambda u: u if u.get("total") not in (None, "0") else None)(cq_usage(api_client, alice)),
                     60, what="the ClusterQueue's usage")
    assert usage["total"] in ("2400m", "2.4") and usage.get("borrowed") in ("900m", "0.9"), usage
    logs = volume_dir(core, ns_a, "user-env-logs") / "ta"
    wait_for(lambda: events(metrics(logs, "worker-0"), "step"), 600, interval=0.5, what="Alice training")

    # Bob trains within his nominal quota: he takes back what Alice borrowed.
    bob_values = {**values, "worker": {"replicas": 2, "resources": {"requests": {"cpu": "700m"}}},
                  "code": {**values["code"], "args": ["--steps", "40", "--checkpoint-every", "20"]}}
    run("tfhelm", "up", "--user", bob, "--name", "tb", "-f", "/dev/stdin", *SMALL, stdin=yaml.safe_dump(bob_values))
    preempted = wait_for(lambda: condition(workload_of(api_client, ns_a, ta_uid), "Preempted"), 300,
                         what="Bob reclaiming his share from Alice")
    assert preempted["reason"] == "InCohortReclamation", preempted
    tb = job_of(ns_b, "tb", "worker")
    assert wait_for(lambda: job_condition(batch, ns_b, tb), 600, interval=2,
                    what="Bob's training to finish") == "Complete", pod_logs(core, ns_b, "tfhelm.io/cluster=tb")
    assert wait_for(lambda: job_condition(batch, ns_a, ta), 900, interval=2,
                    what="Alice's training to finish") == "Complete", pod_logs(core, ns_a, "tfhelm.io/cluster=ta")
    starts = events(metrics(logs, "worker-0"), "start")
    assert len(starts) >= 2 and starts[-1]["step"] > 0, starts
    check_no_queued_cluster_holds_a_node(recorder.snapshot(), training_cpu)


def tenant_kubeconfig(tmp_path, user: str) -> str:
    """A kubeconfig with the token of the user's notebook (what a tenant acts with)."""
    ns = userspec.user_namespace(user)
    token = run("kubectl", "create", "token", userspec.service_account(), "-n", ns, "--duration", "1h").stdout.strip()
    admin = yaml.safe_load(run("kubectl", "config", "view", "--raw", "--minify").stdout)
    cluster = admin["clusters"][0]
    path = tmp_path / f"{user}.kubeconfig"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
                                    "users": [{"name": user, "user": {"token": token}}],
                                    "contexts": [{"name": user, "context": {"cluster": cluster["name"], "user": user,
                                                                            "namespace": ns}}],
                                    "current-context": user}))
    return str(path)


def test_a_tenant_cannot_give_its_training_a_priority_it_was_not_granted(workspaces, tmp_path):
    (alice, _), low, high = workspaces
    ns = userspec.user_namespace(alice)
    env = {**os.environ, "KUBECONFIG": tenant_kubeconfig(tmp_path, alice)}
    values = yaml.safe_dump({**inline_collective("tp", "training"), "worker": {"replicas": 1}})

    def as_alice(*args, stdin=None):
        return subprocess.run(list(args), capture_output=True, text=True, input=stdin, timeout=300, env=env)
    refused = as_alice("helm", "install", "tp", str(chart_path()), "-n", ns, "-f", "-", *SMALL,
                       "--set", f"queue.priorityClass={high}", "--rollback-on-failure", stdin=values)
    assert refused.returncode != 0 and "tfhelm-user-priorities" in refused.stderr, refused.stderr
    assert f"WorkloadPriorityClass {high} is not one namespace {ns} may use" in refused.stderr, refused.stderr
    jobs = json.loads(as_alice("kubectl", "get", "jobs", "-n", ns, "-l", f"kueue.x-k8s.io/priority-class={high}",
                               "-o", "json").stdout)["items"]
    assert not jobs
    # Nor can it relabel a Job later: an allowed priority first, then the label changed.
    ok = as_alice("helm", "install", "tq", str(chart_path()), "-n", ns, "-f", "-", *SMALL,
                  "--set", "clusterName=tq", "--set", f"queue.priorityClass={low}", stdin=values)
    assert ok.returncode == 0, ok.stderr
    job = json.loads(as_alice("kubectl", "get", "jobs", "-n", ns, "-l", "tfhelm.io/cluster=tq,tfhelm.io/role=worker",
                              "-o", "json").stdout)["items"][0]["metadata"]["name"]
    relabel = as_alice("kubectl", "label", "--overwrite", "-n", ns, f"job/{job}", f"kueue.x-k8s.io/priority-class={high}")
    assert relabel.returncode != 0 and "tfhelm-user-priorities" in relabel.stderr, relabel.stderr
    assert as_alice("helm", "uninstall", "tq", "-n", ns, "--wait").returncode == 0
