"""How fast the reaper removes parameter servers, and what it costs the API server.

    python bench/reaper_latency.py [--runs 5] [--grace 1] [--sizes 1x2,1x50,20x2]

Against the local cluster (tfhelm_dev.localcluster; started if it is not running, honouring
TFHELM_LOCAL_DIR) or KUBECONFIG with --kubeconfig-as-is. For each size CLUSTERSxWORKERS it
installs the clusters the way `tfhelm up` does (PS release + workload release), runs the
reaper in this process (one watch per cluster for one cluster, one watch for the namespace
for many), completes every worker at once, and measures per cluster:

  * latency: from the moment the workers' Job is seen Complete to the moment the last PS
    Deployment is deleted (the reaper's own part), and to the moment the last PS pod is gone
    from the API (plus Kubernetes' garbage collector and the kubelet, here kwok), minus the
    grace period; all moments seen by a separate, uncounted watch in this process;
  * API requests per reap: the reaper's own (a counting wrapper on its client's REST calls:
    list, watch, Events, deletes) and Helm's (`helm --v=6` logs every response; a wrapper
    counts them), divided by the number of clusters reaped.

Prints a table to stdout; writes nothing else.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import stat
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kubernetes import client, watch  # noqa: E402

from tfhelm.cluster import deploy  # noqa: E402
from tfhelm.cluster.values import ClusterOptions  # noqa: E402
from tfhelm.contract import CLUSTER_LABEL, ROLE_LABEL  # noqa: E402
from tfhelm.helm import Helm, helm_executable  # noqa: E402
from tfhelm.kube import Kube  # noqa: E402
from tfhelm.kubeconfig import load_config  # noqa: E402
from tfhelm.reaper import KubeReapClient, Reaper, default_config  # noqa: E402
from tfhelm_dev import localcluster  # noqa: E402

HELM_WRAPPER = """#!/bin/sh
# helm, counting its API requests: klog at -v=6 logs one "Response" line per request.
log=$(mktemp)
"{helm}" "$@" --v=6 2>"$log"; rc=$?
grep -c 'round_trippers.*"Response"' "$log" >>"{counts}"
grep -v '^[IWE][0-9][0-9][0-9][0-9] ' "$log" >&2
rm -f "$log"
exit $rc
"""

VALUES = {
    "storage": {"data": {"enabled": False}, "logs": {"enabled": False}},
    # Workers run until the bench completes them (kwok re-reads this annotation).
    "worker": {"podAnnotations": {"tfhelm.io/kwok-complete-after": "1h"},
               "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}},
    "ps": {"resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}},
}


class CountingApi:
    """Counts the REST calls made through one ApiClient (a watch is one call)."""

    def __init__(self, api: client.ApiClient):
        self.counts: collections.Counter = collections.Counter()
        self._lock = threading.Lock()
        inner = api.rest_client.request

        def request(method, url, *args, **kwargs):
            with self._lock:
                self.counts[method + (" watch" if "watch=True" in url else "")] += 1
            return inner(method, url, *args, **kwargs)
        api.rest_client.request = request

    def total(self) -> int:
        return sum(self.counts.values())


PS = f"{ROLE_LABEL}=ps"


class Observer:
    """Uncounted watches on the namespace's Jobs, PS Deployments and PS pods: when each
    cluster's workers were seen Complete, its last PS Deployment deleted, its last PS pod gone."""

    def __init__(self, api: client.ApiClient, ns: str):
        self.core, self.batch, self.ns = client.CoreV1Api(api), client.BatchV1Api(api), ns
        self.apps = client.AppsV1Api(api)
        self.done_at: dict[str, float] = {}
        self.deps_live: dict[str, set] = collections.defaultdict(set)
        self.deleted_at: dict[str, float] = {}
        self.ps_live: dict[str, set] = collections.defaultdict(set)
        self.gone_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._watches: list[watch.Watch] = []
        targets = []
        for list_fn, live, at in ((self.apps.list_namespaced_deployment, self.deps_live, self.deleted_at),
                                  (self.core.list_namespaced_pod, self.ps_live, self.gone_at)):
            listed = list_fn(ns, label_selector=PS)
            for o in listed.items:
                live[o.metadata.labels[CLUSTER_LABEL]].add(o.metadata.name)
            targets.append((self._last_gone, (list_fn, listed.metadata.resource_version, live, at)))
        jobs = self.batch.list_namespaced_job(ns, label_selector=f"{ROLE_LABEL}=worker")
        targets.append((self._jobs, (jobs.metadata.resource_version,)))
        self._threads = [threading.Thread(target=self._quietly, args=(fn, args), daemon=True)
                         for fn, args in targets]
        for t in self._threads:
            t.start()

    def _quietly(self, fn, args):
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - stop() closes the connection under the stream
            if not self._stop.is_set():
                raise

    def _last_gone(self, list_fn, rv, live: dict[str, set], at: dict[str, float]):
        """Track each cluster's live PS objects of one kind; note when the last one went."""
        w = watch.Watch()
        self._watches.append(w)
        for ev in w.stream(list_fn, self.ns, label_selector=PS, resource_version=rv):
            o, now = ev["object"], time.monotonic()
            c = o.metadata.labels[CLUSTER_LABEL]
            if ev["type"] == "DELETED":
                live[c].discard(o.metadata.name)
                if not live[c]:
                    at.setdefault(c, now)
            else:
                live[c].add(o.metadata.name)

    def _jobs(self, rv):
        w = watch.Watch()
        self._watches.append(w)
        for ev in w.stream(self.batch.list_namespaced_job, self.ns, label_selector=f"{ROLE_LABEL}=worker",
                           resource_version=rv):
            j = ev["object"]
            if any(c.type == "Complete" and c.status == "True" for c in j.status.conditions or []):
                self.done_at.setdefault(j.metadata.labels[CLUSTER_LABEL], time.monotonic())

    def stop(self):
        self._stop.set()
        for w in self._watches:
            w.stop()


def wait(check, timeout, what):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.2)


def run_once(admin: client.ApiClient, clusters: int, workers: int, grace: float, counts_file: Path,
             out=sys.stderr) -> tuple[list[float], list[float], int, int]:
    """One run: install, reap, measure. Returns (latencies to Deployments deleted, to pods
    gone, reaper requests, helm requests)."""
    core = client.CoreV1Api(admin)
    ns = f"bench-reaper-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    names = [f"c{i:02d}" for i in range(clusters)]
    try:
        wait(lambda: _has_default_sa(core, ns), 30, "the default ServiceAccount")
        helm = Helm()
        for name in names:
            opts = ClusterOptions(name=name, namespace=ns, workers=workers, ps=1, value_files=[VALUES])
            deploy.up(deploy.plan(opts), helm, Kube(admin))
        running = lambda role, n: len([p for p in core.list_namespaced_pod(  # noqa: E731
            ns, label_selector=f"{ROLE_LABEL}={role}").items if p.status.phase == "Running"]) == n
        wait(lambda: running("ps", clusters) and running("worker", clusters * workers), 300, "pods running")

        observer = Observer(admin, ns)
        reaper_api = load_config()
        counter = CountingApi(reaper_api)
        counts_file.write_text("")
        r = Reaper(KubeReapClient(Kube(reaper_api), Helm()), ns, names[0] if clusters == 1 else None,
                   default_config(grace=grace), forever=True, log_line=lambda line: print(f"  {line}", file=out))
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        time.sleep(1)  # the reaper lists and watches
        for p in core.list_namespaced_pod(ns, label_selector=f"{ROLE_LABEL}=worker").items:
            core.patch_namespaced_pod(p.metadata.name, ns, {"metadata": {"annotations": {
                "tfhelm.io/kwok-complete-after": "100ms"}}})
        wait(lambda: len(observer.gone_at) == clusters, 600, "every cluster's PS gone")
        r.stop()
        t.join(60)
        observer.stop()
        deleted = [observer.deleted_at[c] - observer.done_at[c] - grace for c in names]
        gone = [observer.gone_at[c] - observer.done_at[c] - grace for c in names]
        helm_requests = sum(int(x) for x in counts_file.read_text().split())
        return deleted, gone, counter.total(), helm_requests
    finally:
        core.delete_namespace(ns)


def _has_default_sa(core, ns):
    try:
        return core.read_namespaced_service_account("default", ns)
    except client.ApiException:
        return None


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="repetitions of a one-cluster size")
    ap.add_argument("--runs-many", type=int, default=3, help="repetitions of a many-cluster size")
    ap.add_argument("--grace", type=float, default=1.0)
    ap.add_argument("--sizes", default="1x2,1x50,20x2", help="CLUSTERSxWORKERS, comma-separated")
    ap.add_argument("--kubeconfig-as-is", action="store_true", help="use KUBECONFIG; start nothing")
    args = ap.parse_args(argv)
    started = not args.kubeconfig_as_is and localcluster.status() is None
    if not args.kubeconfig_as_is:
        os.environ["KUBECONFIG"] = str(localcluster.up().kubeconfig)
    try:
        rows = measure(args)
    finally:
        if started:  # leave behind only what was running before
            localcluster.down()
    report(rows, args.grace)
    return 0


def measure(args) -> list[tuple]:
    admin = load_config()

    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "helm-requests"
        wrapper = Path(tmp) / "helm"
        wrapper.write_text(HELM_WRAPPER.format(helm=helm_executable(), counts=counts))
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
        os.environ["TFHELM_HELM"] = str(wrapper)  # the reaper's Helm() counts; installs too, ignored

        rows = []
        for size in args.sizes.split(","):
            clusters, workers = (int(x) for x in size.split("x"))
            dele, lat, reaper_req, helm_req, reaps = [], [], 0, 0, 0
            runs = args.runs if clusters == 1 else args.runs_many
            for i in range(runs):
                print(f"{size} run {i + 1}/{runs}", file=sys.stderr)
                d, got, rq, hq = run_once(admin, clusters, workers, args.grace, counts)
                dele += d
                lat += got
                reaper_req, helm_req, reaps = reaper_req + rq, helm_req + hq, reaps + clusters
            rows.append((clusters, workers, runs, len(lat), statistics.median(dele), pct(dele, 0.95),
                         statistics.median(lat), pct(lat, 0.95), max(lat), reaper_req / reaps,
                         helm_req / reaps))
    return rows


def report(rows: list[tuple], grace: float) -> None:
    print(f"reaper latency beyond the grace period ({grace:g}s) and API requests per reap")
    head = ("clusters", "workers", "runs", "reaps", "del p50", "del p95", "gone p50", "gone p95",
            "gone max", "reaper req", "helm req", "total req")
    print("  ".join(f"{h:>10}" for h in head))
    for c, w, runs, n, d50, d95, p50, p95, mx, rq, hq in rows:
        print("  ".join(f"{x:>10}" for x in (c, w, runs, n, f"{d50:.2f}", f"{d95:.2f}", f"{p50:.2f}",
                                              f"{p95:.2f}", f"{mx:.2f}", f"{rq:.1f}", f"{hq:.1f}",
                                              f"{rq + hq:.1f}")))
    print("Seconds from the workers' Job seen Complete, minus the grace: del = last PS Deployment "
          "deleted (the reaper's part), gone = last PS pod gone from the API (plus the garbage "
          "collector and kwok). reaper req: the reaper's own calls (list, watch, deletes, Events; "
          "a shared watch divided over the clusters); helm req: `helm uninstall <name>-ps`.")


if __name__ == "__main__":
    sys.exit(main())
