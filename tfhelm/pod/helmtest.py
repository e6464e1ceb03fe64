"""`helm test`: from inside the cluster, check what every task relies on.

1. The TF_CONFIG of every task in the cluster spec is valid: composed by the launcher's own
   code (mounted beside cluster-spec.json), exactly as each task gets it.
2. Every host in the spec resolves in the cluster DNS (the PS Services and the Job pods'
   hostnames under their headless Services), within the timeout given as argv[1].
It runs in the tasks' own TensorFlow image (`python3 /etc/tfhelm/helm-test.py TIMEOUT`).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from tfhelm.pod.tfconfig import SPEC_FILE, TASK_INDEX, TASK_TYPE, read_spec, resolve_tf_config


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].replace(".", "", 1).isdigit():
        print("usage: helm-test.py TIMEOUT_SECONDS", file=sys.stderr)
        return 2
    timeout = float(argv[0])
    spec_file = os.environ[SPEC_FILE]
    cluster = read_spec(spec_file)
    for role, hosts in cluster.items():
        for i in range(len(hosts)):
            env = {SPEC_FILE: spec_file, TASK_TYPE: role, TASK_INDEX: str(i)}
            config = resolve_tf_config(env)  # raises on an invalid TF_CONFIG
            assert json.loads(env["TF_CONFIG"]) == config and config["cluster"] == cluster
    print(f"TF_CONFIG valid for {sum(map(len, cluster.values()))} task(s): {', '.join(cluster)}")

    pending = {h for hosts in cluster.values() for h in hosts}
    deadline = time.monotonic() + timeout
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
            print(f"FAIL: {len(pending)} host(s) do not resolve after {timeout:g}s: "
                  f"{', '.join(sorted(pending))}", file=sys.stderr)
            return 1
        if pending:
            time.sleep(2)
    print("OK: every task's DNS name resolves")
    return 0
