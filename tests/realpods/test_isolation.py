"""NetworkPolicy is enforced on the real nodes (kube-router's policy controller): a user's
pods cannot reach another user's workspace, their own namespace still can, and the
exposed notebook port still answers from outside the cluster."""

from __future__ import annotations

import urllib.request
import uuid

from kubernetes import client

from tfhelm import users

from .conftest import run, wait_for

PROBE = """
import sys, time, urllib.request
for attempt in range(int(sys.argv[2])):  # a new Service's rules may take kube-proxy a moment
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
            print("REACHED", r.status)
            break
    except Exception as e:
        error = e
        time.sleep(2)
else:
    print("BLOCKED", type(error).__name__, error)
"""


def probe(core: client.CoreV1Api, namespace: str, url: str, attempts: int = 1) -> str:
    """What a pod in `namespace` gets from `url`: 'REACHED ...' or 'BLOCKED ...'."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    security = client.V1SecurityContext(allow_privilege_escalation=False, run_as_non_root=True,
                                        run_as_user=1000, capabilities=client.V1Capabilities(drop=["ALL"]),
                                        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(restart_policy="Never", automount_service_account_token=False, containers=[
            client.V1Container(name="probe", image="tensorflow/tensorflow:2.21.0", security_context=security,
                               command=["python3", "-c", PROBE, url, str(attempts)])])))
    wait_for(lambda: core.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed"),
             300, what=f"probe {namespace}/{name}")
    return core.read_namespaced_pod_log(name, namespace)


def test_users_cannot_reach_each_other_but_the_exposed_port_answers(kubeconfig, core):
    alice, bob = f"a{uuid.uuid4().hex[:5]}", f"b{uuid.uuid4().hex[:5]}"
    for u in (alice, bob):
        run("tfhelm", "user", "add", u, "--timeout", "300")
    try:
        alice_files = users.files_url(alice)
        # Alice's own pods reach her file server (tried until kube-proxy has the Service) ...
        assert probe(core, users.user_namespace(alice), alice_files, attempts=30).startswith("REACHED 200")
        # ... and bob's, with the Service in place, do not.
        refused = probe(core, users.user_namespace(bob), alice_files)
        # Dropped by the policy: the name resolves, the connection never completes.
        assert refused.startswith("BLOCKED") and "gaierror" not in refused, refused
        urls = dict(line.split(":", 1) for line in run("tfhelm", "user", "url", alice).stdout.splitlines())
        def notebook_answers():
            try:
                with urllib.request.urlopen(urls["notebook"].strip(), timeout=5) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(notebook_answers, 60, interval=1, what="alice's notebook on its node port")
    finally:
        for u in (alice, bob):
            run("tfhelm", "user", "remove", u, "--purge")
