"""Chaos: one long training on the real nodes under random faults, one after the other.

    python bench/chaos.py [--faults 6] [--seed N] [--steps 4000] [--checkpoint-every 50]

An in-graph training (`examples/ps_in_graph.py`: a chief, 2 worker servers, 1 PS; the chart's
defaults but a short reaper grace) meets, in a random order and each once the training is back
where it was: a task's pod killed with no grace, the training node holding most tasks lost
(link cut, every process frozen) and thawed, that node's link cut and restored, the API server
SIGKILLed and started again, the in-cluster reaper's pod killed (bench/chaoslib.py lists them).
Per fault: seconds until the training is back (the chief's first checkpoint past the one it
had) or, for a control-plane fault, until that part is back; whether the chief restarted, and
from where (no step may be lost behind the last checkpoint). At the end: the training complete,
the parameter servers reaped (none left), nothing written by a thawed node's old tasks. Needs the
local cluster's lock (/work/tools/with-cluster); starts the cluster if it is not running.
Writes bench/results/chaos.{json,md} and the README's chaos table (between its markers).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import chaoslib  # noqa: E402
import peerlib  # noqa: E402
import scale  # noqa: E402
from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from tfhelm.contract import CLUSTER_LABEL, ROLE_LABEL, TASK_INDEX_LABEL  # noqa: E402
from tfhelm_dev import localcluster, localnet, localnode  # noqa: E402

RESULTS = REPO / "bench" / "results"
README_BEGIN, README_END = "<!-- bench:chaos -->", "<!-- /bench:chaos -->"
NAME, WORKERS, PS, GRACE = "chaos", 2, 1, 5
TASKS = {"chief": 1, "worker": WORKERS, "ps": PS}


def log(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def wait(check, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = check()
        except (ApiException, OSError, ValueError):
            result = None  # the API server away (its own fault), a file half-written
        if result:
            return result
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


class Bench:
    def __init__(self, args):
        self.args = args
        self.core = client.CoreV1Api(config.new_client_from_config(str(localcluster.kubeconfig_path())))
        self.apps = client.AppsV1Api(self.core.api_client)
        self.batch = client.BatchV1Api(self.core.api_client)
        self.ns = f"chaos-{uuid.uuid4().hex[:5]}"
        self.training = sorted(n.name for n in localcluster.real_nodes() if n.training and not n.user)
        self.lost_pods: dict[str, float] = {}  # uid of a pod on a node lost -> when that node came back

    # -- the cluster's state

    def pods(self, selector: str = "") -> list:
        sel = f"{CLUSTER_LABEL}={NAME}" + (f",{selector}" if selector else "")
        return self.core.list_namespaced_pod(self.ns, label_selector=sel).items

    @staticmethod
    def task(pod) -> str | None:
        role = pod.metadata.labels.get(ROLE_LABEL)
        index = (pod.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index",
                                                     pod.metadata.labels.get(TASK_INDEX_LABEL))
        return f"{role}-{index}" if role in TASKS else None

    def running(self, away: str | None = None) -> dict[str, object]:
        """Task -> its Running pod (not being deleted, not on `away`)."""
        return {self.task(p): p for p in self.pods() if self.task(p) and p.status.phase == "Running"
                and not p.metadata.deletion_timestamp and p.spec.node_name != away}

    def all_running(self, away: str | None = None) -> bool:
        return len(self.running(away)) == sum(TASKS.values())

    def lines(self) -> list[dict]:
        path = self.logs / "metrics" / "chief-0.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []

    def checkpoint(self) -> int:
        return max((s for _, s in chaoslib.progress(self.lines())), default=0)

    def node_back(self, node: str) -> bool:
        n = self.core.read_node(node)
        ready = next((c.status for c in n.status.conditions or [] if c.type == "Ready"), "Unknown")
        return ready == "True" and not any(t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or [])

    def busiest(self) -> str:
        counts = {n: 0 for n in self.training}
        for p in self.running().values():
            counts[p.spec.node_name] = counts.get(p.spec.node_name, 0) + 1
        return max(self.training, key=lambda n: counts.get(n, 0))

    # -- setup

    def start(self) -> None:
        labels = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn", "audit")}
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=self.ns, labels=labels)))
        wait(lambda: self.core.read_namespaced_service_account("default", self.ns), 30, "the namespace's account")
        a = self.args
        cmd = [sys.executable, "-m", "tfhelm", "up", "--name", NAME, "-n", self.ns, "--script", "examples/ps_in_graph.py",
               "--in-graph", "--chief", "--workers", str(WORKERS), "--ps", str(PS),
               "--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi", "--set", f"reaper.grace={GRACE}",
               # Many faults in one run: the restarts they cause must not exhaust a task's retries.
               "--set", "chief.backoffLimitPerIndex=30", "--set", "worker.backoffLimitPerIndex=30",
               "--", "--steps", str(a.steps), "--checkpoint-every", str(a.checkpoint_every)]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
        if done.returncode:
            raise SystemExit(f"tfhelm up failed:\n{done.stdout}\n{done.stderr}")
        pvc = wait(lambda: (c := self.core.read_namespaced_persistent_volume_claim(f"{NAME}-logs", self.ns))
                   .spec.volume_name and c, 120, "the logs volume")
        self.logs = Path(self.core.read_persistent_volume(pvc.spec.volume_name).spec.host_path.path) / NAME
        wait(lambda: self.checkpoint() >= a.checkpoint_every, 900, "the first checkpoint")
        log(f"training: first checkpoint at {self.checkpoint()}")

    # -- the faults

    def inject(self, kind: str) -> chaoslib.Fault:
        if kind == "pod-kill":
            pods = sorted(self.running().values(), key=lambda p: p.metadata.name)
            pod = pods[self.rng.randrange(len(pods))]
            task = self.task(pod)
            fault = chaoslib.Fault(kind, pod.metadata.name, time.time())
            self.core.delete_namespaced_pod(pod.metadata.name, self.ns, grace_period_seconds=0)
            wait(lambda: (p := self.running().get(task)) and p.metadata.uid != pod.metadata.uid, 600,
                 f"{task} Running again")
            fault.back = time.time()
            return fault
        if kind in ("node-freeze", "link-cut"):
            node = self.busiest()
            real = localcluster.real_node(node)
            on_it = [p.metadata.uid for p in self.running().values() if p.spec.node_name == node]
            fault = chaoslib.Fault(kind, f"{node} ({len(on_it)} tasks)", time.time())
            cut, mend = ((localnode.lose, localnode.restore) if kind == "node-freeze"
                         else (lambda n: localnet.unplug(n.net), lambda n: localnet.plug(n.net)))
            cut(real)
            try:
                wait(lambda: self.all_running(away=node), 900, f"every task Running off {node}")
                fault.back = time.time()
            finally:
                mend(real)
                fault.restored = time.time()
            for uid in on_it:
                self.lost_pods[uid] = fault.restored
            wait(lambda: self.node_back(node), 300, f"{node} Ready again")
            return fault
        if kind == "apiserver-restart":
            fault = chaoslib.Fault(kind, "kube-apiserver", time.time())
            localcluster.restart_apiserver()
            fault.back = time.time()
            return fault
        (reaper,) = self.pods(f"{ROLE_LABEL}=reaper")
        fault = chaoslib.Fault(kind, reaper.metadata.name, time.time())
        self.core.delete_namespaced_pod(reaper.metadata.name, self.ns, grace_period_seconds=0)
        wait(lambda: [p for p in self.pods(f"{ROLE_LABEL}=reaper") if p.metadata.uid != reaper.metadata.uid
                      and p.status.phase == "Running"], 600, "a new reaper Running")
        fault.back = time.time()
        return fault

    def done(self) -> bool:
        job = next(j for j in self.batch.list_namespaced_job(self.ns, label_selector=f"{CLUSTER_LABEL}={NAME}").items
                   if j.metadata.labels[ROLE_LABEL] == "chief")
        return any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or [])

    def run(self) -> dict:
        a = self.args
        self.rng = random.Random(a.seed)
        faults = []
        for kind in chaoslib.plan(a.faults, a.seed):
            if self.done():
                log(f"the training finished before {kind}: {len(faults)} faults in all (raise --steps)")
                break
            mark = self.checkpoint()
            log(f"{kind} (training at checkpoint {mark})")
            fault = self.inject(kind)
            faults.append(fault)
            log(f"{kind} {fault.target}: its part back after {fault.back - fault.at:.0f} s")
            try:  # the training back where it was before the next fault
                wait(lambda: self.checkpoint() > mark or self.done(), 900, "the training past its checkpoint")
            except TimeoutError as e:
                fault.notes.append(str(e))
        wait(self.done, 3600, "the training complete")
        lines = self.lines()
        outcomes = [chaoslib.outcome(f, lines, faults[i + 1].at if i + 1 < len(faults) else None)
                    for i, f in enumerate(faults)]
        try:  # the reaper removes the PS a grace after the end
            wait(lambda: not self.apps.list_namespaced_deployment(self.ns, label_selector=f"{CLUSTER_LABEL}={NAME},"
                                                                  f"{ROLE_LABEL}=ps").items
                 and not self.pods(f"{ROLE_LABEL}=ps"), GRACE + 300, "the PS reaped")
        except TimeoutError:
            pass
        ps_left = len(self.pods(f"{ROLE_LABEL}=ps"))
        after_thaw = [e for t in ("chief-0", "worker-0", "worker-1") for e in self.task_lines(t)
                      if e.get("pod") in self.lost_pods and e["time"] >= self.lost_pods[e["pod"]]]
        return {"faults": [chaoslib.as_dict(f) for f in faults], "outcomes": outcomes,
                "end": {"complete": self.done(), "step": max((s for _, s in chaoslib.progress(lines)), default=0),
                        "checkpoint": self.checkpoint(), "ps_left": ps_left, "after_thaw": len(after_thaw)}}

    def task_lines(self, task: str) -> list[dict]:
        path = self.logs / "metrics" / f"{task}.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []

    def close(self) -> None:
        subprocess.run([sys.executable, "-m", "tfhelm", "down", NAME, "-n", self.ns, "--purge"], cwd=REPO,
                       capture_output=True, timeout=300)
        try:
            self.core.delete_namespace(self.ns)
        except ApiException:
            pass


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--faults", type=int, default=len(chaoslib.KINDS) + 1)
    p.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--checkpoint-every", type=int, default=50)
    a = p.parse_args()
    t0 = time.monotonic()
    if localcluster.status() is None or len(localcluster.real_nodes()) < localnode.MAX_NODES:
        localcluster.up(real=localnode.MAX_NODES)
    os.environ["KUBECONFIG"] = str(localcluster.kubeconfig_path())
    machine = scale.machine(str(localcluster.bin_dir() / "kubectl"))
    bench = Bench(a)
    try:
        bench.start()
        result = bench.run()
    finally:
        bench.close()
    result.update(machine=machine, seed=a.seed, load_average_at_end=os.getloadavg()[0],
                  seconds=time.monotonic() - t0,
                  training={"steps": a.steps, "checkpoint_every": a.checkpoint_every, "workers": WORKERS,
                            "ps": PS, "grace": GRACE})
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "chaos.json").write_text(json.dumps(result, indent=1) + "\n")
    md = chaoslib.table(result)
    (RESULTS / "chaos.md").write_text(md)
    readme = REPO / "README.md"
    text = peerlib.replace_between(readme.read_text(), README_BEGIN, README_END, md)
    if text is not None:
        readme.write_text(text)
        log("README.md chaos table updated")
    print(md)
    return 0 if result["end"]["complete"] and not result["end"]["ps_left"] else 1


if __name__ == "__main__":
    sys.exit(main())
