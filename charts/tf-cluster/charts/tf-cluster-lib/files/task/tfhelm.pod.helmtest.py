# tfhelm/pod/helmtest.py without its prose (make chart-files)
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
            config = resolve_tf_config(env)
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
