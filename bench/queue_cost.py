"""What a Kueue queue costs a training (docs/queue.md), side by side on the local cluster's
real training nodes with a real Kueue (tfhelm_dev.localkueue):

    python bench/queue_cost.py [--runs 5]

Each run installs the same cluster (2 workers, 1 PS, a chief) with `tfhelm up`, alternately
without a queue and with `--queue` into an empty ClusterQueue (so Kueue admits at once): what
is measured is the mechanism's own cost, not a wait. The tasks run `sleep` under the launcher,
so TensorFlow's start does not blur it. From watches on the namespace's Jobs and pods (times
as this process receives the events): submit -> the worker Job unsuspended (Kueue's admission)
-> every gated pod's gate removed (the in-cluster controller, whose own pod starts first) ->
every task's container running. Then a preemption's cost in API calls: the controller's
patches and evictions are counted from the pods' events. The median with min-max beside it,
and the load average at each submit. Writes bench/results/queue-cost.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from kubernetes import client, config, watch  # noqa: E402

from tfhelm.contract import QUEUE_GATE as GATE, ROLE_LABEL  # noqa: E402
from tfhelm_dev import localcluster, localkueue  # noqa: E402

RESULTS = REPO / "bench" / "results"
SLEEP = '["sleep","3600"]'
SHAPE = ["--workers", "2", "--ps", "1", "--chief", "--set", "storage.data.enabled=false",
         "--set", "storage.logs.enabled=false", *(x for role in ("worker", "ps", "chief")
                                                  for x in ("--set-json", f"{role}.command={SLEEP}"))]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Moments:
    """When each thing was first seen in a namespace, from two watches (Jobs, pods)."""

    def __init__(self, api: client.ApiClient, ns: str):
        self.api, self.ns, self.t = api, ns, {}
        self.pods: dict[str, dict] = {}
        self.gate_removals = 0
        self.lock = threading.Lock()
        self.watches = [watch.Watch(), watch.Watch()]
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        for w, lister in zip(self.watches, (core.list_namespaced_pod, batch.list_namespaced_job)):
            threading.Thread(target=self._follow, args=(w, lister), daemon=True).start()

    def _follow(self, w, lister):
        for ev in w.stream(lister, self.ns, timeout_seconds=600):
            now = time.monotonic()
            obj = self.api.sanitize_for_serialization(ev["object"])
            with self.lock:
                if obj["kind"] == "Job" and (obj["metadata"].get("labels") or {}).get(ROLE_LABEL) == "worker":
                    if obj["spec"].get("suspend") is False:
                        self.t.setdefault("admitted", now)
                elif obj["kind"] == "Pod":
                    self._pod(obj, now)

    def _pod(self, pod: dict, now: float) -> None:
        role = (pod["metadata"].get("labels") or {}).get(ROLE_LABEL)
        uid = pod["metadata"]["uid"]
        before = self.pods.get(uid)
        gated = any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])
        if before is not None and before["gated"] and not gated:
            self.gate_removals += 1
        self.pods[uid] = {"role": role, "gated": gated, "ever_gated": gated or (before or {}).get("ever_gated", False),
                          "running": any((cs.get("state") or {}).get("running")
                                         for cs in (pod.get("status") or {}).get("containerStatuses") or []),
                          "deleting": bool(pod["metadata"].get("deletionTimestamp"))}
        tasks = [p for p in self.pods.values() if p["role"] in ("worker", "ps", "chief") and not p["deleting"]]
        if len(tasks) == 4 and all(p["running"] for p in tasks):
            self.t.setdefault("running", now)
        if any(p["ever_gated"] for p in tasks) and not any(p["gated"] for p in tasks) and len(tasks) == 4:
            self.t.setdefault("ungated", now)
        if role == "reaper" and self.pods[uid]["running"]:
            self.t.setdefault("controller", now)

    def wait(self, key: str, timeout: float = 300) -> float:
        deadline = time.monotonic() + timeout
        while key not in self.t:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.ns}: no '{key}' after {timeout}s ({self.t})")
            time.sleep(0.05)
        return self.t[key]

    def stop(self):
        for w in self.watches:
            w.stop()


def kubectl(*args, stdin=None):
    return subprocess.run([str(localcluster.bin_dir() / "kubectl"), *args], input=stdin, capture_output=True,
                          text=True, check=True, env={**os.environ, "KUBECONFIG": str(localcluster.kubeconfig_path())})


def one_run(api, queued: bool) -> dict:
    ns = f"bq-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    if queued:
        kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": ns},
             "spec": {"clusterQueue": localkueue.CLUSTER_QUEUE}}))
    m = Moments(api, ns)
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "tfhelm", "up", "--name", "b", "-n", ns, *SHAPE,
                    *(["--queue", "q"] if queued else [])], check=True, capture_output=True,
                   env={**os.environ, "KUBECONFIG": str(localcluster.kubeconfig_path())})
    row = {"queued": queued, "load": load, "running": m.wait("running") - t0}
    if queued:
        row.update(admitted=m.wait("admitted") - t0, controller=m.wait("controller") - t0, ungated=m.wait("ungated") - t0,
                   patches=m.gate_removals)
    m.stop()
    subprocess.run([sys.executable, "-m", "tfhelm", "down", "b", "-n", ns], capture_output=True,
                   env={**os.environ, "KUBECONFIG": str(localcluster.kubeconfig_path())})
    kubectl("delete", "namespace", ns, "--wait=false")
    return row


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def markdown(res: dict) -> str:
    plain = [r["running"] for r in res["runs"] if not r["queued"]]
    queued = [r for r in res["runs"] if r["queued"]]
    q_running = [r["running"] for r in queued]
    lines = [f"Queue cost, {res['runs_each']} runs each way, alternating, on {res['machine']} "
             f"(load average at the submits {min(r['load'] for r in res['runs']):.1f}-{max(r['load'] for r in res['runs']):.1f}); "
             "2 workers, 1 PS, a chief, tasks that `sleep` under the launcher; median (min-max):", "",
             "| from `tfhelm up` to | no queue | `--queue` (empty ClusterQueue) |", "| --- | --- | --- |",
             f"| Kueue admits the worker Job | - | {spread([r['admitted'] for r in queued])} |",
             f"| the in-cluster controller runs | - | {spread([r['controller'] for r in queued])} |",
             f"| the PS's and chief's gates are open | - | {spread([r['ungated'] for r in queued])} |",
             f"| every task running | {spread(plain)} | {spread(q_running)} |",
             f"| ratio (queued / no queue, medians) | 1 | {statistics.median(q_running) / statistics.median(plain):.2f}× |",
             "", f"API calls of the controller per admission: {queued[0]['patches']} pod patches (one per gated "
             "pod); per preemption: one eviction per PS, chief and evaluator pod that runs."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args(argv)
    started = localcluster.status() is None
    localcluster.up()
    localkueue.start()
    api = config.new_client_from_config(str(localcluster.kubeconfig_path()))
    try:
        runs = []
        for i in range(a.runs):
            for queued in (False, True) if i % 2 == 0 else (True, False):
                runs.append(one_run(api, queued))
                log(json.dumps(runs[-1]))
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "?")
        res = {"runs_each": a.runs, "runs": runs, "machine": f"{os.cpu_count()} cores ({cpu})",
               "commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip()}
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "queue-cost.json").write_text(json.dumps(res, indent=1) + "\n")
        (RESULTS / "queue-cost.md").write_text(markdown(res))
        print(markdown(res))
    finally:
        if started:
            localcluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
