"""What a Kueue queue costs a training, and tfhelm + Kueue beside its peer TFJob + Kueue
(docs/queue.md), side by side on the local cluster's real training nodes with a real Kueue
(tfhelm_dev.localkueue, its `batch/job` and `kubeflow.org/tfjob` integrations) and Kubeflow's
real training-operator (bench/peer.py's Operator):

    python bench/queue_cost.py [--runs 5] [--handoffs 3] [--preemptions 3]

Admission: each run installs the same cluster (2 workers, 1 PS, a chief), in turn with `tfhelm
up` without a queue, with `tfhelm up --queue` and as a TFJob with Kueue's queue label (written as
a TFJob user writes one: the replicas, the image, `sleep`, the same requests), into an empty
ClusterQueue, so Kueue admits at once: what is measured is the mechanism's own cost, not a wait.
The tasks run `sleep` (tfhelm's under its launcher), so TensorFlow's start does not blur it.
From watches on the namespace (times as this process receives the events): submit -> admitted
(tfhelm's worker Job, the TFJob unsuspended) -> tfhelm's gated pods' gates removed (by the
in-cluster controller, whose own pod starts first) -> every task's container running.

Handoff: two such clusters over the ClusterQueue's quota, B submitted once A runs; their
workers and chief `sleep` 30 s. A done (its worker Job Complete, the TFJob Succeeded) -> B
admitted -> B running, and what B holds while it waits (pods; pods bound to a node).

Preemption: L (WorkloadPriorityClass bench-low) runs; H (bench-high), the same shape, over the
quota with L, is submitted: H submitted -> L's Workload evicted (its Job or TFJob suspended) ->
no task of L running -> H's every task running; then H's workers and chief end (`sleep` 30 s)
and L is readmitted: H done -> L's every task running again. The TFJob's tasks run `sleep` under
a shell that exits on SIGTERM (`sleep` as PID 1 would ignore it and wait out the 30 s grace);
tfhelm's launcher passes SIGTERM on to its `sleep`.

The median with min-max beside it and the load average at each submit. Writes
bench/results/queue-cost.{json,md} and the README's table between its markers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import yaml  # noqa: E402
from kubernetes import client, config, watch  # noqa: E402
from urllib3.exceptions import ProtocolError  # noqa: E402

import peerlib  # noqa: E402
from tfhelm.contract import PRIORITY_LABEL, QUEUE_GATE as GATE, QUEUE_LABEL, ROLE_LABEL  # noqa: E402
from tfhelm_dev import localcluster, localkueue  # noqa: E402

RESULTS = REPO / "bench" / "results"
README_BEGIN, README_END = "<!-- bench:queue -->", "<!-- /bench:queue -->"
TASKS = ("worker", "ps", "chief")
WORKERS = 2
SIDES = {"plain": "`tfhelm up`", "tfhelm": "`tfhelm up --queue`", "tfjob": "TFJob + Kueue"}
TFJOB_ROLE = "training.kubeflow.org/replica-type"
# Handoff: each cluster asks the ClusterQueue for more than half of it (tfhelm counts its
# workers' Job, Kueue a TFJob's every replica: both over the quota with two clusters).
HANDOFF_CPU = "800m"
HANDOFF_SLEEP = 30
PRIORITIES = {"bench-low": 100, "bench-high": 1000}  # Kueue WorkloadPriorityClasses


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def role_of(pod: dict) -> str | None:
    labels = pod["metadata"].get("labels") or {}
    return labels.get(ROLE_LABEL) or (labels.get(TFJOB_ROLE) or "").lower() or None


class Moments:
    """When each thing was first seen in a namespace, from watches on its pods and on what
    Kueue admits (tfhelm's Jobs or the TFJobs)."""

    def __init__(self, api: client.ApiClient, ns: str, side: str):
        self.api, self.ns, self.t = api, ns, {}
        self.pods: dict[str, dict] = {}
        self.gate_removals = 0
        self.bound_early = 0  # pods bound to a node before `admitted`
        self.lock = threading.Lock()
        core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
        listers = [(core.list_namespaced_pod, (ns,))]
        if side == "tfjob":
            listers.append((custom.list_namespaced_custom_object, ("kubeflow.org", "v1", ns, "tfjobs")))
        else:
            listers.append((batch.list_namespaced_job, (ns,)))
        self.watches, self.stopping = [watch.Watch() for _ in listers], False
        for w, (lister, args) in zip(self.watches, listers):
            threading.Thread(target=self._follow, args=(w, lister, args), daemon=True).start()

    def _follow(self, w, lister, args):
        try:
            self._record(w.stream(lister, *args, timeout_seconds=900))
        except ProtocolError:  # stop() cut the connection mid-chunk: the moments are taken
            if not self.stopping:
                raise

    def _record(self, events):
        for ev in events:
            now = time.monotonic()
            obj = ev["object"] if isinstance(ev["object"], dict) else self.api.sanitize_for_serialization(ev["object"])
            with self.lock:
                if obj["kind"] == "Pod":
                    self._pod(obj, now, gone=ev["type"] == "DELETED")
                elif obj["kind"] == "TFJob":
                    self._owner(obj, (obj["spec"].get("runPolicy") or {}).get("suspend"), "Succeeded", now)
                elif (obj["metadata"].get("labels") or {}).get(ROLE_LABEL) == "worker":
                    self._owner(obj, obj["spec"].get("suspend"), "Complete", now)

    def _owner(self, obj: dict, suspend, done: str, now: float) -> None:
        if suspend is False:
            self.t.setdefault("admitted", now)
        elif suspend and "admitted" in self.t:  # Kueue evicted it (a preemption)
            self.t.setdefault("suspended", now)
            self._check_stopped(now)  # its pods' events may have come first
        if any(c["type"] == done and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or []):
            self.t.setdefault("done", now)

    def _pod(self, pod: dict, now: float, gone: bool = False) -> None:
        role, uid = role_of(pod), pod["metadata"]["uid"]
        before = self.pods.get(uid)
        gated = any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])
        if before is not None and before["gated"] and not gated:
            self.gate_removals += 1
        bound = bool(pod["spec"].get("nodeName"))
        if bound and not (before or {}).get("bound") and role in TASKS and "admitted" not in self.t:
            self.bound_early += 1
        self.pods[uid] = {"role": role, "gated": gated, "ever_gated": gated or (before or {}).get("ever_gated", False),
                          "bound": bound, "running": any((cs.get("state") or {}).get("running")
                                                         for cs in (pod.get("status") or {}).get("containerStatuses") or []),
                          "deleting": bool(pod["metadata"].get("deletionTimestamp")), "gone": gone}
        tasks = [p for p in self.pods.values() if p["role"] in TASKS and not p["deleting"]]
        if len(tasks) == WORKERS + 2 and all(p["running"] for p in tasks):
            self.t.setdefault("running", now)
            if "stopped" in self.t:
                self.t.setdefault("rerunning", now)
        self._check_stopped(now)
        if any(p["ever_gated"] for p in tasks) and not any(p["gated"] for p in tasks) and len(tasks) == WORKERS + 2:
            self.t.setdefault("ungated", now)
        if role == "reaper" and self.pods[uid]["running"]:
            self.t.setdefault("controller", now)

    def _check_stopped(self, now: float) -> None:
        if "suspended" in self.t and not any(p["running"] and not p["gone"] for p in self.pods.values()
                                             if p["role"] in TASKS):
            self.t.setdefault("stopped", now)

    def task_pods(self) -> int:
        with self.lock:
            return sum(1 for p in self.pods.values() if p["role"] in TASKS)

    def wait(self, key: str, timeout: float = 300) -> float:
        deadline = time.monotonic() + timeout
        while key not in self.t:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.ns}: no '{key}' after {timeout}s ({self.t})")
            time.sleep(0.05)
        return self.t[key]

    def stop(self):
        self.stopping = True
        for w in self.watches:
            w.stop()


def kubectl(*args, stdin=None, check=True):
    return subprocess.run([str(localcluster.bin_dir() / "kubectl"), *map(str, args)], input=stdin, capture_output=True,
                          text=True, check=check, env={**os.environ, "KUBECONFIG": str(localcluster.kubeconfig_path())})


def tfhelm(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfhelm", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "KUBECONFIG": str(localcluster.kubeconfig_path())})


def shape(seconds: int, cpu: str | None) -> list[str]:
    """`tfhelm up` options: 2 workers, 1 PS, a chief; no volumes; workers and chief `sleep`
    `seconds`, the PS an hour (they never end by themselves; the reaper ends them)."""
    args = ["--workers", WORKERS, "--ps", 1, "--chief", "--set", "storage.data.enabled=false",
            "--set", "storage.logs.enabled=false"]
    for role in TASKS:
        args += ["--set-json", f'{role}.command=["sleep","{3600 if role == "ps" else seconds}"]']
    if cpu:
        args += ["--set", f"worker.resources.requests.cpu={cpu}"]
    return args


def tfjob(name: str, ns: str, seconds: int, cpu: str | None, priority: str | None = None) -> dict:
    """The same cluster as a TFJob user writes it: tfhelm's image and requests, `sleep` (under a
    shell that ends on SIGTERM, as a training script would), Kueue's queue and priority labels;
    the PS deleted once the chief succeeds (cleanPodPolicy Running)."""
    rendered = tfhelm("render", name, "-n", ns, *shape(seconds, cpu))
    if rendered.returncode:
        raise RuntimeError(f"tfhelm render: {rendered.stderr.strip()[-400:]}")
    job = next(d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "Job"
               and (d["metadata"].get("labels") or {}).get(ROLE_LABEL) == "worker")
    c = job["spec"]["template"]["spec"]["containers"][0]

    def replicas(role: str, n: int, restart: str) -> dict:
        requests = {"cpu": cpu or c["resources"]["requests"]["cpu"], "memory": c["resources"]["requests"]["memory"]} \
            if role == "Worker" else {"cpu": "100m", "memory": c["resources"]["requests"]["memory"]}
        return {"replicas": n, "restartPolicy": restart, "template": {"spec": {"containers": [{
            "name": "tensorflow", "image": c["image"], "imagePullPolicy": c.get("imagePullPolicy", "IfNotPresent"),
            "command": ["sh", "-c", f"trap 'exit 143' TERM; sleep {3600 if role == 'PS' else seconds} & wait"],
            "resources": {"requests": requests}}]}}}
    labels = {QUEUE_LABEL: "q", **({PRIORITY_LABEL: priority} if priority else {})}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"runPolicy": {"cleanPodPolicy": "Running"},
                     "tfReplicaSpecs": {"Chief": replicas("Chief", 1, "OnFailure"), "PS": replicas("PS", 1, "Always"),
                                        "Worker": replicas("Worker", WORKERS, "OnFailure")}}}


def namespace(queued: bool) -> str:
    ns = f"bq-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    if queued:
        kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": ns},
             "spec": {"clusterQueue": localkueue.CLUSTER_QUEUE}}))
    return ns


def submitter(side: str, name: str, ns: str, seconds: int = 3600, cpu: str | None = None,
              priority: str | None = None):
    """The user's submit command, ready to run: the TFJob's manifest is written beforehand, as its
    user has it in a file (so the times do not count the render that makes it here)."""
    if side == "tfjob":
        manifest = yaml.safe_dump(tfjob(name, ns, seconds, cpu, priority))
        return lambda: kubectl("create", "-f", "-", stdin=manifest)

    def up():
        r = tfhelm("up", "--name", name, "-n", ns, *shape(seconds, cpu), *(["--queue", "q"] if side == "tfhelm" else []),
                   *(["--priority", priority] if priority else []))
        if r.returncode:
            raise RuntimeError(f"tfhelm up: {r.stderr.strip()[-400:]}")
    return up


def remove(side: str, name: str, ns: str) -> None:
    if side != "tfjob":
        tfhelm("down", name, "-n", ns)
    kubectl("delete", "namespace", ns, "--wait=false")


def admission(api, side: str) -> dict:
    ns = namespace(side != "plain")
    m = Moments(api, ns, side)
    submit = submitter(side, "b", ns)
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    submit()
    row = {"side": side, "load": load, "running": m.wait("running") - t0}
    if side != "plain":
        row["admitted"] = m.wait("admitted") - t0
    if side == "tfhelm":
        row.update(controller=m.wait("controller") - t0, ungated=m.wait("ungated") - t0, patches=m.gate_removals)
    m.stop()
    remove(side, "b", ns)
    return row


def handoff(api, side: str) -> dict:
    """A runs, B over the quota waits; when A is done, how soon B is admitted and runs."""
    a_ns, b_ns = namespace(True), namespace(True)
    a, b = Moments(api, a_ns, side), Moments(api, b_ns, side)
    try:
        submit_b = submitter(side, "b", b_ns, HANDOFF_SLEEP, HANDOFF_CPU)
        submitter(side, "a", a_ns, HANDOFF_SLEEP, HANDOFF_CPU)()
        a.wait("running")
        row = {"side": side, "load": os.getloadavg()[0]}
        submit_b()
        a_done = a.wait("done", 600)
        row["b_pods_waiting"] = b.task_pods()  # what B made while A held the quota
        row.update(admitted=b.wait("admitted", 600) - a_done, running=b.wait("running", 600) - a_done,
                   b_bound_waiting=b.bound_early)
        b.wait("done", 600)
        return row
    finally:
        a.stop(), b.stop()
        remove(side, "a", a_ns), remove(side, "b", b_ns)


def preemption(api, side: str) -> dict:
    """L runs; H, of a higher priority, over the quota with L, preempts it; once H is done, L
    runs again."""
    l_ns, h_ns = namespace(True), namespace(True)
    low, high = Moments(api, l_ns, side), Moments(api, h_ns, side)
    try:
        submit_h = submitter(side, "h", h_ns, HANDOFF_SLEEP, HANDOFF_CPU, "bench-high")
        submitter(side, "l", l_ns, 3600, HANDOFF_CPU, "bench-low")()
        low.wait("running")
        row = {"side": side, "load": os.getloadavg()[0]}
        t0 = time.monotonic()
        submit_h()
        row.update(evicted=low.wait("suspended", 600) - t0, stopped=low.wait("stopped", 600) - t0,
                   running=high.wait("running", 600) - t0)
        h_done = high.wait("done", 600)
        row["l_rerunning"] = low.wait("rerunning", 600) - h_done
        return row
    finally:
        low.stop(), high.stop()
        remove(side, "l", l_ns), remove(side, "h", h_ns)


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def markdown(res: dict) -> str:
    runs, hand = res["runs"], res.get("handoffs", [])
    by = {side: [r for r in runs if r["side"] == side] for side in SIDES}
    loads = [r["load"] for r in runs + hand + res.get("preemptions", [])]
    col = lambda side, key: spread([r[key] for r in by[side] if key in r])  # noqa: E731
    plain = statistics.median(r["running"] for r in by["plain"])
    lines = [f"Measured at {res['commit']} on {res['machine']}, Kueue {res['kueue']}, training-operator "
             f"{res['operator']}; load average at the submits {min(loads):.1f}-{max(loads):.1f}. Median (min-max).", "",
             f"**Admission**, {res['runs_each']} runs each way, in turn; 2 workers, 1 PS, a chief that `sleep`; "
             "an empty ClusterQueue:", "",
             "| from the submit command to | " + " | ".join(SIDES.values()) + " |", "| --- | --- | --- | --- |",
             f"| Kueue admits (tfhelm's worker Job, the TFJob) | - | {col('tfhelm', 'admitted')} | {col('tfjob', 'admitted')} |",
             f"| tfhelm's in-cluster controller runs | - | {col('tfhelm', 'controller')} | - |",
             f"| tfhelm's PS and chief gates open | - | {col('tfhelm', 'ungated')} | - |",
             "| every task running | " + " | ".join(col(s, "running") for s in SIDES) + " |",
             "| ratio to `tfhelm up` (medians) | 1 | " + " | ".join(
                 f"{statistics.median(r['running'] for r in by[s]) / plain:.2f}×" for s in ("tfhelm", "tfjob")) + " |"]
    if hand:
        hb = {side: [r for r in hand if r["side"] == side] for side in ("tfhelm", "tfjob")}
        hcol = lambda side, key: spread([r[key] for r in hb[side]])  # noqa: E731
        most = lambda side, key: max((r[key] for r in hb[side]), default="-")  # noqa: E731
        lines += ["", f"**Handoff**, {res['handoffs_each']} runs each way: A and B as above, workers requesting "
                  f"{HANDOFF_CPU} CPU, over the ClusterQueue's quota together; B submitted once A runs; workers and "
                  f"chief `sleep` {HANDOFF_SLEEP} s:", "",
                  "| | `tfhelm up --queue` | TFJob + Kueue |", "| --- | --- | --- |",
                  f"| A done -> B admitted | {hcol('tfhelm', 'admitted')} | {hcol('tfjob', 'admitted')} |",
                  f"| A done -> B's every task running | {hcol('tfhelm', 'running')} | {hcol('tfjob', 'running')} |",
                  f"| B's task pods while it waits (most) | {most('tfhelm', 'b_pods_waiting')} (gated) | "
                  f"{most('tfjob', 'b_pods_waiting')} |",
                  f"| of them bound to a node before B is admitted | {most('tfhelm', 'b_bound_waiting')} | "
                  f"{most('tfjob', 'b_bound_waiting')} |"]
    pre = res.get("preemptions", [])
    if pre:
        pb = {side: [r for r in pre if r["side"] == side] for side in ("tfhelm", "tfjob")}
        pcol = lambda side, key: spread([r[key] for r in pb[side]])  # noqa: E731
        lines += ["", f"**Preemption**, {res['preemptions_each']} runs each way: L (priority bench-low) runs; H "
                  "(bench-high), the same shape, over the quota with L, is submitted; H's workers and chief `sleep` "
                  f"{HANDOFF_SLEEP} s (the TFJob's under a shell that exits on SIGTERM):", "",
                  "| | `tfhelm up --queue --priority` | TFJob + Kueue |", "| --- | --- | --- |",
                  f"| H submitted -> L evicted (suspended) | {pcol('tfhelm', 'evicted')} | {pcol('tfjob', 'evicted')} |",
                  f"| H submitted -> no task of L running | {pcol('tfhelm', 'stopped')} | {pcol('tfjob', 'stopped')} |",
                  f"| H submitted -> H's every task running | {pcol('tfhelm', 'running')} | {pcol('tfjob', 'running')} |",
                  f"| H done -> L's every task running again | {pcol('tfhelm', 'l_rerunning')} | "
                  f"{pcol('tfjob', 'l_rerunning')} |"]
    patches = next((r["patches"] for r in by["tfhelm"]), "?")
    lines += ["", f"tfhelm's controller per admission: {patches} pod patches (one per gated pod); per preemption: "
              "one eviction per PS, chief and evaluator pod that runs."]
    return "\n".join(lines) + "\n"


class _OperatorEnv:
    """What bench/peer.py's Operator needs: a scratch directory, the admin's kubectl, a kubeconfig."""

    def __init__(self, tmp: Path):
        self.tmp, self.operator_kubeconfig = tmp, localcluster.kubeconfig_path()

    def admin(self, *args, check=True):
        return kubectl(*args, check=check)


def operator(tmp: Path):
    """The TFJob CRD installed, then Kubeflow's training-operator started (bench/peer.py)."""
    import peer

    kubectl("apply", "--server-side", "-f", peer.TFJOB_CRD)
    deadline = time.monotonic() + 60  # (`kubectl wait` fails while the CRD has no status yet)
    while kubectl("get", "crd/tfjobs.kubeflow.org", "-o", "jsonpath={.status.conditions[?(@.type=='Established')]"
                  ".status}", check=False).stdout.strip() != "True":
        if time.monotonic() > deadline:
            raise RuntimeError("the TFJob CRD is not Established after 60 s")
        time.sleep(0.2)
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": peer.CLIENTS_NS}}))
    kubectl("delete", "secret", "training-operator-webhook-cert", "-n", peer.CLIENTS_NS, "--ignore-not-found")
    return peer.Operator(_OperatorEnv(tmp))


def version(name: str) -> str:
    return next(line.split(":=")[1].strip() for line in (REPO / "mk" / "versions.mk").read_text().splitlines()
                if line.startswith(name))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="admission runs each way (default 5)")
    p.add_argument("--handoffs", type=int, default=3, help="handoff runs each way (default 3; 0: none)")
    p.add_argument("--preemptions", type=int, default=3, help="preemption runs each way (default 3; 0: none)")
    a = p.parse_args(argv)
    started = localcluster.status() is None
    localcluster.up()
    op = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            op = operator(Path(tmp))
            log("starting Kueue with its batch/job and kubeflow.org/tfjob integrations")
            localkueue.start(frameworks=("batch/job", "kubeflow.org/tfjob"))
            api = config.new_client_from_config(str(localcluster.kubeconfig_path()))
            kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(
                [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": n},
                  "value": v} for n, v in PRIORITIES.items()]))
            runs, handoffs, preemptions = [], [], []
            for i in range(a.runs):
                for side in list(SIDES)[i % 3:] + list(SIDES)[:i % 3]:
                    runs.append(admission(api, side))
                    log(f"admission {json.dumps(runs[-1])}")
            for i in range(a.handoffs):
                for side in ("tfhelm", "tfjob") if i % 2 == 0 else ("tfjob", "tfhelm"):
                    handoffs.append(handoff(api, side))
                    log(f"handoff {json.dumps(handoffs[-1])}")
            for i in range(a.preemptions):
                for side in ("tfhelm", "tfjob") if i % 2 == 0 else ("tfjob", "tfhelm"):
                    preemptions.append(preemption(api, side))
                    log(f"preemption {json.dumps(preemptions[-1])}")
            op.stop()
            op = None
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "?")
        res = {"runs_each": a.runs, "runs": runs, "handoffs_each": a.handoffs, "handoffs": handoffs,
               "preemptions_each": a.preemptions, "preemptions": preemptions,
               "machine": f"{os.cpu_count()} cores ({cpu})", "kueue": version("KUEUE_VERSION"),
               "operator": version("TRAINING_OPERATOR_VERSION"),
               "commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip()}
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "queue-cost.json").write_text(json.dumps(res, indent=1) + "\n")
        md = markdown(res)
        (RESULTS / "queue-cost.md").write_text(md)
        readme = REPO / "README.md"
        text = peerlib.replace_between(readme.read_text(), README_BEGIN, README_END, md)
        if text is not None:
            readme.write_text(text)
        print(md)
    finally:
        if op:
            op.stop()
        localkueue.stop()
        if started:
            localcluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
