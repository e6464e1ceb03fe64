"""How soon a training's end is seen: from the last worker pod's success to the reaper's
decision, to `up --wait`'s return, and to the Job controller's own Complete condition.

    python bench/done_latency.py [--sizes 4,256,1024] [--runs 3] [--runs-large 1]

Against the local cluster (tfhelm_dev.localcluster; started with enough kwok nodes if it is
not running, and stopped again). For each worker count N it installs a cluster the way
`tfhelm up` does (PS release + workload release) with workers that run until the bench
completes them, lets them all run, then starts in this process the reaper (grace 1 h: it
only decides) and `up --wait`'s wait (tfhelm.cluster.progress.wait_for_training), and completes
every worker at once (kwok re-reads the pods' delay annotation). Moments are seen by
separate, uncounted watches on the worker pods and the Job, in this process.

TFHELM_SRC=DIR runs another checkout's tfhelm (e.g. the code before a change) with this
same bench. Prints a table to stdout; writes nothing else.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("TFHELM_SRC") or str(REPO))

from kubernetes import client, watch  # noqa: E402
from rich.console import Console  # noqa: E402

from tfhelm.cluster import deploy, progress  # noqa: E402
from tfhelm.cluster.spec import Shape  # noqa: E402
from tfhelm.cluster.values import ClusterOptions  # noqa: E402
from tfhelm.contract import ROLE_LABEL  # noqa: E402
from tfhelm.helm import Helm  # noqa: E402
from tfhelm.kube import Kube  # noqa: E402
from tfhelm.kubeconfig import load_config  # noqa: E402
from tfhelm.reaper import KubeReapClient, Reaper, default_config  # noqa: E402
from tfhelm_dev import localcluster  # noqa: E402
from reaper_latency import wait  # noqa: E402  (bench/ is on the path: scripts run from it)

PODS_PER_NODE = 200
VALUES = {
    "storage": {"data": {"enabled": False}, "logs": {"enabled": False}},
    "worker": {"podAnnotations": {"tfhelm.io/kwok-complete-after": "1h"},
               "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}},
    "ps": {"resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}},
}


class Moments:
    """When the last worker pod turned Succeeded and the Job got Complete, as seen by raw
    watches (no client models: cheap at 1,024 pods)."""

    def __init__(self, api: client.ApiClient, ns: str, workers: int):
        self.core, self.batch, self.ns, self.workers = client.CoreV1Api(api), client.BatchV1Api(api), ns, workers
        self.succeeded: dict[str, float] = {}
        self.last_pod: float | None = None
        self.job_complete: float | None = None
        self._watches = [watch.Watch(return_type="object"), watch.Watch(return_type="object")]
        pods = self.core.list_namespaced_pod(ns, label_selector=f"{ROLE_LABEL}=worker", _preload_content=False)
        jobs = self.batch.list_namespaced_job(ns, label_selector=f"{ROLE_LABEL}=worker", _preload_content=False)
        self._threads = [threading.Thread(target=self._quietly, daemon=True,
                                          args=(fn, json.loads(r.data)["metadata"]["resourceVersion"]))
                         for fn, r in ((self._pods, pods), (self._jobs, jobs))]
        for t in self._threads:
            t.start()

    def _quietly(self, fn, rv):
        try:
            fn(rv)
        except Exception:  # noqa: BLE001 - stop() closes the connection under the stream
            pass

    def _pods(self, rv):
        for ev in self._watches[0].stream(self.core.list_namespaced_pod, self.ns, label_selector=f"{ROLE_LABEL}=worker",
                                          resource_version=rv):
            p, now = ev["object"], time.monotonic()
            if (p.get("status") or {}).get("phase") == "Succeeded" and p["metadata"]["name"] not in self.succeeded:
                self.succeeded[p["metadata"]["name"]] = now
                if len(self.succeeded) == self.workers:
                    self.last_pod = now

    def _jobs(self, rv):
        for ev in self._watches[1].stream(self.batch.list_namespaced_job, self.ns, label_selector=f"{ROLE_LABEL}=worker",
                                          resource_version=rv):
            conds = (ev["object"].get("status") or {}).get("conditions") or []
            if self.job_complete is None and any(c["type"] == "Complete" and c["status"] == "True" for c in conds):
                self.job_complete = time.monotonic()

    def stop(self):
        for w in self._watches:
            w.stop()


def run_once(admin: client.ApiClient, workers: int, out=sys.stderr) -> tuple[float, float, float]:
    """(reaper decided, wait returned, Job Complete) in seconds after the last pod's success."""
    core, batch = client.CoreV1Api(admin), client.BatchV1Api(admin)
    ns = f"bench-done-{workers}-{uuid.uuid4().hex[:5]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=ns, annotations=localcluster.SIMULATED_NAMESPACE_ANNOTATIONS)))
    try:
        wait(lambda: _has_default_sa(core, ns), 30, "the default ServiceAccount")
        opts = ClusterOptions(name="c", namespace=ns, workers=workers, ps=1, value_files=[VALUES])
        deploy.up(deploy.plan(opts), Helm(), Kube(admin))
        running = lambda: len([p for p in core.list_namespaced_pod(  # noqa: E731
            ns, label_selector=f"{ROLE_LABEL}=worker").items if p.status.phase == "Running"]) == workers
        wait(running, 900, f"{workers} workers running")
        moments = Moments(admin, ns, workers)

        decided: dict[str, float] = {}

        def said(line: str) -> None:
            if "training complete" in line:
                decided.setdefault("reaper", time.monotonic())
        reaper_kube = Kube(load_config())
        r = Reaper(KubeReapClient(reaper_kube), ns, "c", default_config(grace=3600), forever=True, log_line=said)
        threading.Thread(target=r.run, daemon=True).start()

        def waiting():
            console = Console(file=io.StringIO(), force_terminal=False)
            progress.wait_for_training(Kube(load_config()), ns, "c", Shape(workers=workers, ps=1), console,
                                       timeout=900)
            decided["wait"] = time.monotonic()
        threading.Thread(target=waiting, daemon=True).start()
        time.sleep(2)  # both have listed and watch
        for p in core.list_namespaced_pod(ns, label_selector=f"{ROLE_LABEL}=worker").items:
            core.patch_namespaced_pod(p.metadata.name, ns, {"metadata": {"annotations": {
                "tfhelm.io/kwok-complete-after": "100ms"}}})
        wait(lambda: len(decided) == 2 and moments.job_complete and moments.last_pod, 900, "the end seen")
        r.stop()
        moments.stop()
        base = moments.last_pod
        return decided["reaper"] - base, decided["wait"] - base, moments.job_complete - base
    finally:
        batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
        core.delete_namespace(ns)


def _has_default_sa(core, ns):
    try:
        return core.read_namespaced_service_account("default", ns)
    except client.ApiException:
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4,256,1024", help="worker counts, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="repetitions of a size up to 16 workers")
    ap.add_argument("--runs-large", type=int, default=1, help="repetitions of a larger size")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    started = localcluster.status() is None
    real = 0 if started else len(localcluster.real_nodes())  # never restart someone's nodes
    info = localcluster.up(nodes=math.ceil(max(sizes) * 1.1 / PODS_PER_NODE) + 2, real=real)
    os.environ["KUBECONFIG"] = str(info.kubeconfig)
    rows = []
    try:
        admin = load_config()
        for n in sizes:
            runs = args.runs if n <= 16 else args.runs_large
            got = []
            for i in range(runs):
                print(f"{n} workers, run {i + 1}/{runs}", file=sys.stderr)
                got.append(run_once(admin, n))
            rows.append((n, runs, *(statistics.median(col) for col in zip(*got)),
                         *(max(col) for col in zip(*got))))
    finally:
        if started:
            localcluster.down()
    src = os.environ.get("TFHELM_SRC") or str(REPO)
    print(f"seconds from the last worker pod Succeeded to: the reaper's decision, `up --wait`'s return, "
          f"the Job's Complete condition (median, max); tfhelm from {src}")
    print("  ".join(f"{h:>10}" for h in ("workers", "runs", "reaper", "wait", "Job", "reaper max", "wait max",
                                          "Job max")))
    for row in rows:
        print("  ".join(f"{x:>10}" if isinstance(x, int) else f"{x:>10.2f}" for x in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
