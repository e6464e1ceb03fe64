"""`helm test`: from inside the cluster, check what every task relies on.

1. The TF_CONFIG of every task in the cluster spec is valid: composed by the launcher
   itself (mounted beside cluster-spec.json), exactly as each task gets it.
2. Every host in the spec resolves in the cluster DNS (the PS Services and the Job pods'
   hostnames under their headless Services), within the timeout given as argv[1].
Standard library only: it runs in the tasks' own TensorFlow image.
"""

import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.environ["TFHELM_CLUSTER_SPEC_FILE"]))
import launcher  # noqa: E402

spec_file = os.environ["TFHELM_CLUSTER_SPEC_FILE"]
cluster = launcher.read_spec(spec_file)
for role, hosts in cluster.items():
    for i in range(len(hosts)):
        env = {"TFHELM_CLUSTER_SPEC_FILE": spec_file, "TFHELM_TASK_TYPE": role, "TFHELM_TASK_INDEX": str(i)}
        config = launcher.resolve_tf_config(env)  # raises on an invalid TF_CONFIG
        assert json.loads(env["TF_CONFIG"]) == config and config["cluster"] == cluster
print(f"TF_CONFIG valid for {sum(map(len, cluster.values()))} task(s): {', '.join(cluster)}")

pending = {h for hosts in cluster.values() for h in hosts}
deadline = time.monotonic() + float(sys.argv[1])
while pending:
    for host in sorted(pending):
        name, _, port = host.rpartition(":")
        try:
            socket.getaddrinfo(name, int(port), proto=socket.IPPROTO_TCP)
            print(f"resolves: {host}")
            pending.discard(host)
        except socket.gaierror:
            pass
    if pending and time.monotonic() > deadline:
        sys.exit(f"FAIL: {len(pending)} host(s) do not resolve after {sys.argv[1]}s: {', '.join(sorted(pending))}")
    if pending:
        time.sleep(2)
print("OK: every task's DNS name resolves")
