"""Tenancy on the real nodes, tried as a tenant would: NetworkPolicy is enforced (kube-router's
policy controller), so a user's pods cannot reach another user's workspace while their own
namespace still can and the exposed notebook port answers from outside; and from inside a
user's own notebook, with its own ServiceAccount, no Service can capture other traffic."""

from __future__ import annotations

import json
import urllib.request

from tfhelm.workspace import userspec

from .conftest import probe, run, wait_for

# Run in the notebook's container, as its user could from a Jupyter terminal: its mounted
# ServiceAccount token is all it has.
CAPTURE = """
import json
from kubernetes import client, config
config.load_incluster_config()
core, ns = client.CoreV1Api(), open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
tries = {"externalIPs": {"externalIPs": ["10.231.0.1"]}, "NodePort": {"type": "NodePort"},
         "LoadBalancer": {"type": "LoadBalancer"}, "ClusterIP": {}}
got = {}
for what, spec in tries.items():
    body = {"metadata": {"name": "capture-" + what.lower()}, "spec": {"ports": [{"port": 53}], **spec}}
    try:
        core.create_namespaced_service(ns, body, dry_run="All")
        got[what] = 201
    except client.rest.ApiException as e:
        got[what] = e.status
print(json.dumps(got))
"""


def test_users_cannot_reach_each_other_but_the_exposed_port_answers(two_users, core):
    alice, bob = two_users
    alice_files = userspec.files_url(alice)
    # Alice's own pods reach her file server (tried until kube-proxy has the Service) ...
    (own,) = probe(core, userspec.user_namespace(alice), [(alice_files, None, 30)])
    assert own.startswith("REACHED 200"), own
    # ... and bob's, with the Service in place, do not.
    (refused,) = probe(core, userspec.user_namespace(bob), [(alice_files, None, 1)])
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


def test_a_tenant_cannot_make_a_service_that_captures_traffic(two_users):
    """CVE-2020-8554 from the notebook: externalIPs, a node port or a load balancer of one's
    own are refused (DenyServiceExternalIPs, ValidatingAdmissionPolicy tfhelm-user-services);
    a plain ClusterIP Service, what tf-cluster makes, is admitted."""
    ns = userspec.user_namespace(two_users[0])
    out = run("kubectl", "exec", "-n", ns, f"deploy/{userspec.component_name('notebook')}", "-c", "notebook",
              "--", "python3", "-c", CAPTURE).stdout
    assert json.loads(out) == {"externalIPs": 403, "NodePort": 403, "LoadBalancer": 403, "ClusterIP": 201}


def test_another_users_pod_cannot_scrape_a_tasks_metrics(two_users, core, tmp_path):
    """Every task serves metrics (port 9090): a TF cluster's PS in alice's workspace answers
    her own pods there, and a pod in bob's workspace, with the PS's address, gets nothing."""
    alice, bob = two_users
    ns = userspec.user_namespace(alice)
    script = tmp_path / "wait.py"
    script.write_text("import time\ntime.sleep(600)\n")
    run("tfhelm", "up", "--user", alice, "--name", "scraped", "--workers", "1", "--ps", "1", "--script", str(script))
    try:
        def ps_address():
            pods = core.list_namespaced_pod(ns, label_selector="tfhelm.io/cluster=scraped,tfhelm.io/role=ps").items
            return next((p.status.pod_ip for p in pods if p.status.phase == "Running" and p.status.pod_ip), None)
        metrics = f"http://{wait_for(ps_address, 300, interval=1, what='the PS pod running')}:9090/metrics"
        (own,) = probe(core, ns, [(metrics, None, 60)])  # tried until the launcher serves
        assert own.startswith("REACHED 200") and "tfhelm_task_up" in own, own
        (refused,) = probe(core, userspec.user_namespace(bob), [(metrics, None, 1)])
        assert refused.startswith("BLOCKED"), refused
    finally:
        run("tfhelm", "down", "scraped", "-n", ns, "--purge")
