"""tfhelm side by side with its real peer, Kubeflow's TFJob (training-operator v1.8.1).

    python bench/peer.py [--quick] [--reps 5] [--fault-reps 1] [--steps 600] [--parts real,faults,kwok]
                         [--sizes 256,1024] [--tfjob-worker-restart OnFailure] [--tfjob-ps-restart Always]
                         [--prefix peer] [--readme]
    python bench/peer.py --from-json bench/results/peer.json [--merge MORE.json] [--extra-faults X.json] [--readme]
    make bench-peer | make bench-peer-quick   (PEER_ARGS="..." passes options)

The results in bench/results/: peer.json (the full run, with peer-faults.json's two more fault
runs each way merged) and peer-tfjob-exitcode.json (the faults with the TFJob's restartPolicy
ExitCode for Worker and PS), the report written by the --from-json line above. Results older
than `format` 2 are read too (their "complete" is the DNS row; bench/peerlib.py upgrade()).

One run, the same workloads both ways, the sides alternating (which goes first flips every
rep); each row is the median and the min–max of the runs; the machine's load average is
recorded at each submit. Everything a user does goes through the commands a user runs:
`tfhelm up` for tfhelm, `kubectl create -f` of a TFJob for the peer, `kubectl delete pod` or
`kubectl exec` for a fault. The TFJob is what its user would write for the same image,
launcher, script, volumes, security contexts and resources (bench/peerlib.py tfjob_template:
none of tfhelm's chart tuning, such as the PS readiness probe, ndots 1, tolerations or gRPC
keepalive), so only the controllers differ.

  * real nodes (the local cluster's training nodes): 4 workers and 1 PS train
    examples/ps_between_graph.py --steps 600, --reps times each way (default 5);
  * faults, real nodes, once worker 0 recorded step 100: worker 1's pod, then PS 0's, deleted
    (`kubectl delete pod`), and worker 1's training process killed inside its pod (`kubectl
    exec`: SIGKILL to the launcher's child, bench/peerlib.py CRASH; the pod is not deleted, the
    launcher exits 137): does the training still finish, when is the task stopped, running
    again (a new pod, or the same pod's container restarted), back in a session;
  * kwok nodes at N workers and 8 PS (256 and 1,024; --quick: 32 and 128), pods that never
    finish: until all Running and every TF_CONFIG name resolves, objects, sizes, requests.

What each row means:
  * times are seen by watches the bench opens before the submit command starts, or read from
    the example's own records (examples/tfhelm_example.py Metrics: its metrics lines on the
    logs volume, with the pod's clock, which is this host's), the same way for both sides;
  * TF cluster complete: every worker's first step record (each reached the PS, found the
    model initialised and trained a step); first training step: worker 0's; training: worker
    0's first step to the last worker's done record;
  * names resolve: pods Running and every TF_CONFIG host resolves, asked of the real nodes'
    CoreDNS (bench/peerlib.py: names as a pod's resolver reaches them); all kwok can show;
  * training done seen: the first sign a side knows that every worker is done: its
    condition (tfhelm's worker Job Complete, the TFJob's Succeeded), its controller's record
    of it (tfhelm's reaper decides from the pods, before the Job's condition, and records a
    TFClusterReaping Event) or its controller deleting the PS; the condition alone is a row
    of its own; both from the last worker pod's Succeeded;
  * PS gone: the PS pods deleted; tfhelm's in-cluster reaper runs with grace 0 (its default is
    30 s), the TFJob has cleanPodPolicy Running (its default None never removes them);
  * requests by client: the API server's dispatched requests per FlowSchema, one FlowSchema
    per client made by the bench (the user's commands run with a ServiceAccount of their own,
    the operator with another, pods with theirs), and the kube-controller-manager's own client
    count (it runs as the admin, like everything of the local cluster), from before the submit
    command to the run's end;
  * largest object: compact JSON of every object in the namespace as the API server
    returns it (managedFields included), Helm's release Secrets and the TFJob too.

Needs the local cluster's real nodes (started here with them, stopped at the end) and
bin/training-operator.v1 and bin/kubeflow.org_tfjobs.yaml (`make training-operator`).
Writes bench/results/peer{,-quick}.{json,md}; --readme (or a full run) rewrites README.md's
Peer table between its markers. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import peerlib  # noqa: E402
import scale  # noqa: E402  (the cluster, command runner, machine facts)
from scale import REPO, log, run  # noqa: E402

from tfhelm import yamlio  # noqa: E402
from tfhelm_dev import localnode  # noqa: E402

NAME = "peer"
REAPING = "TFClusterReaping"  # tfhelm.reaper.REASON_REAPING: the reaper saw training done
SCRIPT = REPO / "examples" / "ps_between_graph.py"
SMALL = ["--set", "storage.data.size=64Mi", "--set", "storage.logs.size=64Mi"]
REAL = {"workers": 4, "ps": 1}
FULL_KWOK, QUICK_KWOK, KWOK_PS = [256, 1024], [32, 128], 8
README_BEGIN, README_END = "<!-- bench:peer -->", "<!-- /bench:peer -->"
CLIENTS_NS = "bench-peer-clients"
BIN = REPO / "bin"
OPERATOR_BIN, TFJOB_CRD = BIN / "training-operator.v1", BIN / "kubeflow.org_tfjobs.yaml"
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # fixed in the operator (pkg/cert)
# One FlowSchema per client: (client, FlowSchema name, precedence, subjects). All lead to the
# `exempt` priority level, so counting them queues nothing.
CLIENTS = [
    ("user's commands (tfhelm, helm, kubectl)", "bench-peer-user", 40,
     [{"kind": "ServiceAccount", "serviceAccount": {"name": "user", "namespace": CLIENTS_NS}}]),
    ("training-operator", "bench-peer-operator", 40,
     [{"kind": "ServiceAccount", "serviceAccount": {"name": "training-operator", "namespace": CLIENTS_NS}}]),
    ("pods (tfhelm's reaper)", "bench-peer-pods", 60, [{"kind": "Group", "group": {"name": "system:serviceaccounts"}}]),
]
# The local cluster's control plane and nodes all use the admin identity (system:masters: the
# API server's own `exempt` FlowSchema), so the controller-manager, whose Job, Deployment,
# ReplicaSet, EndpointSlice and garbage-collector controllers work for both sides, is counted
# by its own client metrics instead.
KCM = "kube-controller-manager (its client's count)"
KINDS = ("pods,services,endpointslices,configmaps,secrets,serviceaccounts,persistentvolumeclaims,"
         "jobs,deployments,replicasets,roles,rolebindings,tfjobs")


SIDES = ["tfhelm", "tfjob"]
TFJOB_RESTART = ["OnFailure", "Always"]  # the TFJob's Worker and PS restartPolicy


def order(i: int) -> list[str]:
    both = ["tfhelm", "tfjob"] if i % 2 == 0 else ["tfjob", "tfhelm"]
    return [w for w in both if w in SIDES]


# ---------------------------------------------------------------- clients and the operator

class Env:
    """What every run shares: the cluster, the user's and the operator's identities (each a
    ServiceAccount with a kubeconfig of its own, counted by its own FlowSchema), the TFJob CRD
    and the running operator."""

    def __init__(self, cl: scale.Cluster, tmp: Path, tfjob: bool = True):
        self.cl, self.tmp = cl, tmp
        self.kubectl = cl.kubectl
        self.admin_env = dict(os.environ, KUBECONFIG=cl.kubeconfig)
        objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CLIENTS_NS}}]
        for sa in ("user", "training-operator"):
            objs.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": CLIENTS_NS}})
            objs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                         "metadata": {"name": f"bench-peer-{sa}"},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                         "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": CLIENTS_NS}]})
        everything = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                         "clusterScope": True, "namespaces": ["*"]}],
                      "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}
        for _, fs, precedence, subjects in CLIENTS:
            objs.append({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                         "metadata": {"name": fs},
                         "spec": {"matchingPrecedence": precedence, "priorityLevelConfiguration": {"name": "exempt"},
                                  "rules": [dict(everything, subjects=subjects)]}})
        self.admin("apply", "-f", "-", stdin=yaml.safe_dump_all(objs))
        self.user_kubeconfig = self._kubeconfig("user")
        self.operator_kubeconfig = self._kubeconfig("training-operator")
        self.user_env = dict(os.environ, KUBECONFIG=str(self.user_kubeconfig))
        self.operator = None
        if tfjob:
            log(f"installing the TFJob CRD ({TFJOB_CRD.stat().st_size // 1024} KiB, server-side)")
            self.admin("apply", "--server-side", "-f", TFJOB_CRD)
            deadline = time.monotonic() + 60  # (`kubectl wait` fails while the CRD has no status yet)
            while self.admin("get", "crd/tfjobs.kubeflow.org", "-o", "jsonpath={.status.conditions[?(@.type=="
                             "'Established')].status}", check=False).stdout.strip() != "True":
                if time.monotonic() > deadline:
                    raise RuntimeError("the TFJob CRD is not Established after 60 s")
                time.sleep(0.2)
            self.operator = Operator(self)
        self.coredns = self._coredns()

    def admin(self, *args, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([self.kubectl, *map(str, args)], input=stdin, capture_output=True, text=True,
                           env=self.admin_env, timeout=300)
        if check and r.returncode:
            raise RuntimeError(f"kubectl {' '.join(map(str, args))[:120]}: {r.stderr.strip()[-400:]}")
        return r

    def _kubeconfig(self, sa: str) -> Path:
        token = self.admin("create", "token", sa, "-n", CLIENTS_NS, "--duration", "12h").stdout.strip()
        admin = yaml.safe_load(Path(self.cl.kubeconfig).read_text())
        ctx = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
        cluster = next(c for c in admin["clusters"] if c["name"] == ctx["cluster"])
        config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
                  "users": [{"name": sa, "user": {"token": token}}],
                  "contexts": [{"name": sa, "context": {"cluster": cluster["name"], "user": sa}}],
                  "current-context": sa}
        path = self.tmp / f"{sa}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def _coredns(self) -> list[tuple[str, bool]]:
        """(address, DO bit) to ask in turn: every real node's CoreDNS; on the training nodes
        never the plain query their pods send, so no negative answer the bench caused is
        cached for a pod (CoreDNS keys its cache by the DO bit too)."""
        nodes = json.loads(self.admin("get", "nodes", "-o", "json").stdout)["items"]
        key, value = self.cl.lc.USER_NODE_LABEL
        combos = []
        for n in nodes:
            labels = n["metadata"].get("labels") or {}
            if labels.get("type") == "kwok":
                continue
            ip = next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP")
            user = labels.get(key) == value
            combos += [(ip, do) for do in (False, True) if user or do]
        if not combos:
            raise RuntimeError("no real node: the TF_CONFIG names cannot be resolved")
        return combos

    def requests(self) -> dict[str, float]:
        counts = peerlib.requests_by_flow_schema(self.admin("get", "--raw", "/metrics").stdout)
        try:
            counts[KCM] = peerlib.client_requests(self._kcm_metrics())
        except (OSError, ValueError) as e:
            log(f"kube-controller-manager metrics: {e}")
        return counts

    def _kcm_metrics(self) -> str:
        """kube-controller-manager's /metrics (its secure port; the admin certificate)."""
        import ssl
        import urllib.request

        cluster = self.cl.lc.local_dir() / "kwok" / "clusters" / self.cl.lc.CLUSTER_NAME
        pid = int((cluster / "pids" / "kube-controller-manager.pid").read_text())
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        port = next(a.split("=", 1)[1] for a in args if a.startswith("--secure-port="))
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        ctx.load_cert_chain(cluster / "pki" / "admin.crt", cluster / "pki" / "admin.key")
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx, timeout=10) as r:
            return r.read().decode()

    def close(self) -> None:
        if self.operator:
            self.operator.stop()
        self.admin("delete", "--ignore-not-found", "--wait=false", *[f"flowschema/{fs}" for _, fs, _, _ in CLIENTS],
                   "clusterrolebinding/bench-peer-user", "clusterrolebinding/bench-peer-training-operator", check=False)


class Operator:
    """training-operator v1.8.1 as a host process, TFJob only, with its own ports and identity.
    It insists on its webhook Secret (a CA key in PKCS#1) and on serving certificates in a
    fixed directory, even with no webhook configuration registered: both made here."""

    PORTS = {"metrics": 28080, "health": 28081, "webhook": 29443}

    def __init__(self, env: Env):
        if not OPERATOR_BIN.is_file():
            raise SystemExit(f"{OPERATOR_BIN} missing: run `make training-operator`")
        self.env = env
        self.log_path = env.tmp / "training-operator.log"
        certs = env.tmp / "certs"
        certs.mkdir()
        dns = f"training-operator.{CLIENTS_NS}.svc"
        ossl = lambda *a: subprocess.run(["openssl", *a], cwd=certs, check=True, capture_output=True)  # noqa: E731
        ossl("genrsa", "-traditional", "-out", "ca.key", "2048")
        ossl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/O=training-operator/CN=training-operator-ca",
             "-days", "3650", "-out", "ca.crt")
        ossl("genrsa", "-traditional", "-out", "tls.key", "2048")
        ossl("req", "-new", "-key", "tls.key", "-subj", f"/CN={dns}", "-out", "tls.csr")
        (certs / "ext").write_text(f"subjectAltName=DNS:{dns}\n")
        ossl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "3650", "-extfile", "ext", "-out", "tls.crt")
        env.admin("create", "secret", "generic", "training-operator-webhook-cert", "-n", CLIENTS_NS,
                  *[f"--from-file={f}={certs / f}" for f in ("ca.crt", "ca.key", "tls.crt", "tls.key")])
        self.made_cert_dir = not CERT_DIR.exists()
        CERT_DIR.mkdir(parents=True, exist_ok=True)
        for f in ("tls.crt", "tls.key"):
            shutil.copy(certs / f, CERT_DIR / f)
        p = self.PORTS
        cmd = [str(OPERATOR_BIN), "--enable-scheme=tfjob", f"--metrics-bind-address=127.0.0.1:{p['metrics']}",
               f"--health-probe-bind-address=127.0.0.1:{p['health']}", f"--webhook-server-port={p['webhook']}"]
        self.out = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, KUBECONFIG=str(env.operator_kubeconfig),
                                              MY_POD_NAMESPACE=CLIENTS_NS))
        log(f"training-operator started (pid {self.proc.pid}, log {self.log_path})")
        deadline = time.monotonic() + 120
        while b"Starting workers" not in self.log_path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log_path.read_text(errors="replace")[-1500:]
                self.stop()
                raise RuntimeError(f"training-operator did not start its TFJob controller:\n{tail}")
            time.sleep(0.5)
        log("training-operator: TFJob controller started")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()
        if self.made_cert_dir:
            shutil.rmtree(CERT_DIR.parent, ignore_errors=True)


# ---------------------------------------------------------------- watching a run

class Recorder:
    """What the watches saw of one run, as seconds since the submit command started."""

    def __init__(self, who: str, workers: int, ps: int):
        self.who, self.workers, self.ps = who, workers, ps
        self.lock = threading.Lock()
        self.t0 = time.perf_counter()
        self.wall0 = time.time()  # the same instant on the clock the pods' records use
        self.marks: dict[str, float] = {}
        self.pods: dict[str, dict] = {}  # uid -> name, task, phase, deleting, gone, restarts
        self.tf_config: dict | None = None
        self.victim: dict | None = None  # uid, task, restarts, t (the fault command's start)
        self.failure: str | None = None  # the Failed condition's message

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def mark(self, key: str, t: float | None = None) -> None:
        if key not in self.marks:
            self.marks[key] = self.now() if t is None else t

    def on_pod(self, typ: str, pod: dict) -> None:
        task = peerlib.task_of(pod)
        if task is None:
            return
        meta, status = pod["metadata"], pod.get("status") or {}
        with self.lock:
            p = self.pods.setdefault(meta["uid"], {"name": meta["name"], "task": task, "gone": False})
            if typ == "DELETED":
                p["gone"] = True
            p["phase"] = status.get("phase")
            p["deleting"] = bool(meta.get("deletionTimestamp"))
            p["restarts"] = sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or [])
            # The training container's own state: a crash in place ends it (and a pod with
            # restartPolicy OnFailure starts it again) while the pod stays Running.
            tf = next((c for c in status.get("containerStatuses") or [] if c.get("name") == "tensorflow"), {})
            p["container_running"] = "running" in (tf.get("state") or {})
            if self.tf_config is None and self.who == "tfjob":
                self.tf_config = peerlib.pod_tf_config(pod)
            self._evaluate()

    def on_job(self, typ: str, obj: dict) -> None:
        if typ == "DELETED":
            return
        if self.who == "tfhelm" and (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/component") != "worker":
            return
        conds = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
        done = "Complete" if self.who == "tfhelm" else "Succeeded"
        with self.lock:
            if conds.get(done) == "True":
                self.mark("done_seen")
            if conds.get("Failed") == "True":
                self.mark("failed")
                self.failure = next((c.get("message") for c in obj["status"]["conditions"]
                                     if c["type"] == "Failed"), None)
            self._evaluate()

    def on_reaping(self, typ: str, event: dict) -> None:
        """The reaper's TFClusterReaping Event: it saw training done (with grace 0 it says so
        beside its deletes, which reach the PS pods through the garbage collector)."""
        with self.lock:
            self.mark("reaping_event")

    def _evaluate(self) -> None:
        live = [p for p in self.pods.values() if not p["gone"]]
        running = {p["task"] for p in live if p["phase"] == "Running" and not p["deleting"]}
        if len(running) >= self.workers + self.ps:
            self.mark("running")
        done = {p["task"] for p in self.pods.values() if p["task"][0] == "worker" and p["phase"] == "Succeeded"}
        if len(done) >= self.workers:
            self.mark("workers_done")
        if "workers_done" in self.marks and any(p["task"][0] == "ps" and p["deleting"] for p in live):
            self.mark("ps_deleting")  # the side's controller decided training is done
        if "workers_done" in self.marks and not [p for p in live if p["task"][0] == "ps"]:
            self.mark("ps_gone")
        v = self.victim
        if v:
            victim = self.pods[v["uid"]]
            restarted = victim["restarts"] > v["restarts"]  # its container ended, and started again
            if victim["gone"] or victim["phase"] in ("Failed", "Succeeded") or restarted \
                    or not victim["container_running"]:
                self.mark("victim_stopped")
            if victim["gone"]:
                self.mark("victim_gone")
            if any(p["task"] == v["task"] and p["phase"] == "Running" and not p["deleting"] and p["container_running"]
                   and (uid != v["uid"] or restarted) for uid, p in self.pods.items()):
                self.mark("replacement_running")

    def wait(self, keys, timeout: float) -> str | None:
        """Until one of `keys` is marked; returns it (None: timed out)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for k in keys:
                    if k in self.marks:
                        return k
            time.sleep(0.2)
        return None

    def worker_restarts(self) -> int:
        workers = [p for p in self.pods.values() if p["task"][0] == "worker"]
        return sum(p.get("restarts", 0) for p in workers) + max(0, len(workers) - self.workers)


def watch(list_fn, handler, stop: threading.Event) -> threading.Thread:
    """A raw watch (JSON lines, no model objects: cheap at thousands of pods) of one list
    call; every object goes to handler(type, object), a relist as ADDED."""

    def relist() -> str:
        data = json.loads(list_fn(_preload_content=False).data)
        for item in data["items"]:
            handler("ADDED", item)
        return data["metadata"]["resourceVersion"]

    def loop():
        rv = relist()
        while not stop.is_set():
            try:
                resp = list_fn(watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=5,
                               _preload_content=False)
                buf = b""
                for chunk in resp.stream(65536):
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        if not line.strip():
                            continue
                        ev = json.loads(line)
                        if ev["type"] == "ERROR":
                            raise RuntimeError(ev["object"].get("message", "watch error"))
                        rv = ev["object"]["metadata"].get("resourceVersion", rv)
                        if ev["type"] != "BOOKMARK":
                            handler(ev["type"], ev["object"])
                    if stop.is_set():
                        break
                resp.release_conn()
            except Exception as e:  # noqa: BLE001 - a broken watch: list again and go on
                if stop.is_set():
                    break
                log(f"watch: {type(e).__name__}: {str(e)[:120]}; listing again")
                time.sleep(0.5)
                rv = relist()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


DNS_GAP = 5.2  # s: CoreDNS here caches a negative answer 5 s (`cache 5`, the plugin's TTL 5)


def dns_poll(env: Env, rec: Recorder, names_of, stop: threading.Event) -> None:
    """Once every task runs: ask CoreDNS for every TF_CONFIG name until all resolve (marks
    `dns`). Only the unresolved ones are asked again, each time of the (server, DO) asked
    longest ago and never one asked less than DNS_GAP before, so no answer comes from a
    negative cache entry of the bench's own making: with 4 of them, one round every 1.3 s."""
    while "running" not in rec.marks:
        if stop.is_set():
            return
        time.sleep(0.1)
    resolved: set[str] = set()
    turn = 0
    last = {c: -DNS_GAP for c in env.coredns}
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        while not stop.is_set():
            names = names_of()
            if names:
                todo = [n for n in names if n not in resolved]
                if not todo:
                    rec.mark("dns")
                    return
                combo = min(env.coredns, key=last.get)
                wait = last[combo] + DNS_GAP - time.monotonic()
                if wait > 0:
                    time.sleep(min(wait, 0.05))
                    continue
                last[combo] = time.monotonic()
                server, do = combo
                turn += 1
                ids = {}
                for i, n in enumerate(todo):
                    qid = (turn * 7919 + i) % 65536
                    ids[qid] = n
                    sock.sendto(peerlib.dns_query(qid, n, do=do), (server, 53))
                deadline = time.monotonic() + 0.5
                while ids and time.monotonic() < deadline:
                    sock.settimeout(max(0.01, deadline - time.monotonic()))
                    try:
                        qid, ok = peerlib.dns_answer(sock.recv(4096))
                    except (socket.timeout, struct.error):
                        continue
                    n = ids.pop(qid, None)
                    if n and ok:
                        resolved.add(n)
                if len(resolved) == len(names):
                    rec.mark("dns")
                    return
            else:
                time.sleep(0.05)
    finally:
        sock.close()


# ---------------------------------------------------------------- one run

def objects(env: Env, ns: str) -> dict:
    kinds = KINDS if env.operator else KINDS.replace(",tfjobs", "")
    items = json.loads(env.admin("get", kinds, "-n", ns, "-o", "json").stdout)["items"]
    size, which = peerlib.largest_object(items)
    return {"objects": len(items), "services": sum(1 for i in items if i["kind"] == "Service"),
            "largest_bytes": size, "largest": which}


def tfhelm_hosts(ns: str, env: dict) -> list[str]:
    """The TF_CONFIG names of an installed tfhelm cluster, as `tfhelm tfconfig` reads them
    from its release (the worker Job's name carries the cluster's generation)."""
    r = run([scale.TFHELM, "tfconfig", NAME, "-n", ns, "-t", "worker:0"], env=env)
    if r.rc:
        raise RuntimeError(f"tfhelm tfconfig: {r.first_error()}")
    return peerlib.dns_names(json.loads(r.out[r.out.index("{"):]))


def tfjob_file(env: Env, shape: list, ns: str, workers: int, ps: int, script_args: list) -> Path:
    r = run([scale.TFHELM, "render", NAME, *shape, *(["--", *script_args] if script_args else [])])
    if r.rc:
        raise RuntimeError(f"tfhelm render: {r.first_error()}")
    docs = [d for d in yaml.safe_load_all(r.out) if d]
    path = env.tmp / f"tfjob-{ns}.yaml"
    # tfhelm's dumper: a generation label like 6e1234 stays a string for kubectl.
    path.write_text(yamlio.dump_all(peerlib.tfjob_manifests(docs, NAME, ns, workers, ps, *TFJOB_RESTART),
                                    sort_keys=False))
    return path


def one_run(env: Env, who: str, *, real: bool, workers: int, ps: int, steps: int = 0,
            fault: str | None = None, values: Path | None = None, rep: int = 0) -> dict:
    cl = env.cl
    ns = cl.namespace(f"{who}-{'real' if real else 'kwok'}", workers, simulated=not real)
    shape = ["-n", ns, "-w", workers, "--ps", ps, *(["--script", SCRIPT, *SMALL] if real else ["-f", values])]
    script_args = ["--steps", str(steps)] if real else []
    label = f"{who} {'real' if real else 'kwok'} N={workers} PS={ps}{f' fault={fault}' if fault else ''} rep {rep}"
    row: dict = {"who": who, "real": real, "workers": workers, "ps": ps, "fault": fault, "rep": rep, "namespace": ns}
    hosts: list[str] | None = None  # tfhelm: read from the release once installed; TFJob: from a pod
    if who == "tfhelm":
        reaper = ["--set", "reaper.enabled=true", "--set", "reaper.grace=0"] if real else []
        submit = [scale.TFHELM, "up", "--name", NAME, *shape, *reaper, *(["--", *script_args] if script_args else [])]
    else:
        f = tfjob_file(env, shape, ns, workers, ps, script_args)
        submit = [env.kubectl, "create", "-f", f]
    rec = Recorder(who, workers, ps)
    stop = threading.Event()
    api = cl.api
    from kubernetes import client

    core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
    watch(lambda **kw: core.list_namespaced_pod(ns, **kw), rec.on_pod, stop)
    if who == "tfhelm":
        watch(lambda **kw: batch.list_namespaced_job(ns, **kw), rec.on_job, stop)
        watch(lambda **kw: core.list_namespaced_event(ns, field_selector=f"reason={REAPING}", **kw),
              rec.on_reaping, stop)
    else:
        watch(lambda **kw: custom.list_namespaced_custom_object("kubeflow.org", "v1", ns, "tfjobs", **kw),
              rec.on_job, stop)

    def names():
        if hosts is not None:
            return hosts
        with rec.lock:
            return peerlib.dns_names(rec.tf_config) if rec.tf_config else None

    dns = threading.Thread(target=dns_poll, args=(env, rec, names, stop), daemon=True)
    dns.start()
    time.sleep(0.5)  # the watches listed before the submit command starts
    before = env.requests()
    row["load_at_submit"] = os.getloadavg()[0]
    log(f"{label}: submitting (namespace {ns}, load {row['load_at_submit']:.1f})")
    rec.t0, rec.wall0 = time.perf_counter(), time.time()
    res = run(submit, timeout=600, env=env.user_env)
    row["returned_s"] = res.wall
    if res.rc:
        row["error"] = res.first_error()
        log(f"{label}: submit failed (exit {res.rc}): {row['error']}")
        stop.set()
        return row
    if who == "tfhelm":
        hosts = tfhelm_hosts(ns, env.admin_env)
    timeout = 900 if workers > 256 else 600
    if rec.wait(["running"], timeout):
        dns.join(120)
    row["running_s"] = rec.marks.get("running")
    if "running" in rec.marks and "dns" in rec.marks:
        row["names_s"] = max(rec.marks["running"], rec.marks["dns"])
        row["dns_s"] = rec.marks["dns"]
    row.update(objects(env, ns))
    log(f"{label}: Running {scale.fmt_s(row['running_s'])}, names resolve {scale.fmt_s(row.get('names_s'))}, "
        f"returned {res.wall:.1f}s; {row['services']} Services, largest {row['largest']} "
        f"{scale.fmt_bytes(row['largest_bytes'])}")
    if real and fault:
        fault_phase(env, rec, row, ns)
    elif real:
        end = rec.wait(["ps_gone", "failed"], 480)
        if end == "ps_gone":  # the Job or TFJob condition can come a moment after the pods' end
            rec.wait(["done_seen"], 60)
    else:
        time.sleep(3)  # what the controllers still do once all runs
    after = env.requests()
    stop.set()
    m = rec.marks
    counted = peerlib.delta(before, after, [fs for _, fs, _, _ in CLIENTS] + [KCM])
    row["requests"] = {c: counted[fs] for c, fs, _, _ in CLIENTS} | {KCM: counted[KCM]}
    row["requests_total"] = sum(row["requests"].values())
    row["marks"] = dict(m)
    if rec.failure:
        row["failure"] = rec.failure
    if real:
        row["succeeded"] = "done_seen" in m and "failed" not in m
        row["workers_done_s"] = m.get("workers_done")
        # Done seen: the first sign the side knows, its condition (Job Complete, TFJob
        # Succeeded), its reaper's Event or its controller deleting the PS.
        seen = min((m[k] for k in ("done_seen", "ps_deleting", "reaping_event") if k in m), default=None)
        if "workers_done" in m and seen is not None:
            row["done_seen_after_s"] = seen - m["workers_done"]
        if "workers_done" in m and "done_seen" in m:
            row["condition_after_s"] = m["done_seen"] - m["workers_done"]
        if "ps_gone" in m:
            row["ps_gone_s"] = m["ps_gone"]
            if seen is not None:
                row["ps_gone_after_s"] = m["ps_gone"] - seen
        row["worker_restarts"] = rec.worker_restarts()
        row.update(peerlib.training_times({f"worker-{i}": records(env, ns, f"worker-{i}") for i in range(workers)},
                                          workers, rec.wall0))
        log(f"{label}: {'succeeded' if row['succeeded'] else 'NOT succeeded'}; first step "
            f"{scale.fmt_s(row.get('first_step_s'))}, complete {scale.fmt_s(row.get('complete_s'))}; marks "
            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(m.items(), key=lambda kv: kv[1])))
    else:
        log(f"{label}: requests {row['requests_total']:,} ({row['requests']})")
    if real:
        delete_namespace(env, ns)
    return row


def volume_dir(env: Env, ns: str, claim: str) -> Path | None:
    r = env.admin("get", "pvc", claim, "-n", ns, "-o", "jsonpath={.spec.volumeName}", check=False)
    if r.returncode or not r.stdout:
        return None
    pv = env.admin("get", "pv", r.stdout, "-o", "jsonpath={.spec.hostPath.path}", check=False).stdout
    return Path(pv) if pv else None


_volumes: dict[str, Path] = {}


def records(env: Env, ns: str, task: str) -> list[dict]:
    """The example's records of one task (its metrics file on the logs volume, read on this
    host: the local cluster's volumes are host paths)."""
    if ns not in _volumes:
        d = volume_dir(env, ns, f"{NAME}-logs")
        if not d:
            return []
        _volumes[ns] = d
    path = _volumes[ns] / NAME / "metrics" / f"{task}.jsonl"
    return peerlib.parse_records(path.read_text()) if path.is_file() else []


def progress(env: Env, ns: str) -> int:
    """The highest global step worker 0 recorded."""
    steps = [r.get("step") for r in records(env, ns, "worker-0")]
    return max((s for s in steps if isinstance(s, int)), default=-1)


def fault_phase(env: Env, rec: Recorder, row: dict, ns: str) -> None:
    """Once worker 0 recorded step 100: delete worker 1's or PS 0's pod (`kubectl delete pod`),
    or kill worker 1's training process inside its pod (`kubectl exec`, peerlib.CRASH);
    then until the training is done or failed."""
    fault = row["fault"]
    task = peerlib.FAULTS[fault][1]
    deadline = time.monotonic() + 300
    while progress(env, ns) < 100:
        if time.monotonic() > deadline or "workers_done" in rec.marks or "failed" in rec.marks:
            row["fault_error"] = "training ended (or never reached step 100) before the fault"
            log(f"fault: {row['fault_error']}")
            return
        time.sleep(0.05)
    with rec.lock:
        victim = next(((uid, p) for uid, p in rec.pods.items() if p["task"] == task and not p["gone"]
                       and p["phase"] == "Running" and p["container_running"]), None)
    if victim is None:
        row["fault_error"] = f"no running pod for {task}"
        return
    uid, p = victim
    t = rec.now()
    with rec.lock:
        rec.victim = {"uid": uid, "task": task, "restarts": p["restarts"], "t": t}
    row["fault_at_step"] = progress(env, ns)
    if fault == "crash":
        log(f"fault: killing the training process of {p['name']} (step {row['fault_at_step']})")
        d = run([env.kubectl, "exec", p["name"], "-n", ns, "-c", "tensorflow", "--", *peerlib.CRASH],
                env=env.user_env)
        if not d.rc and d.out.strip():  # when the signal went, after the command's start
            row["fault_lag_s"] = float(d.out.split()[-1]) - rec.wall0 - t
    else:
        log(f"fault: deleting {p['name']} (step {row['fault_at_step']})")
        d = run([env.kubectl, "delete", "pod", p["name"], "-n", ns, "--wait=false"], env=env.user_env)
    if d.rc:
        row["fault_error"] = d.first_error()
        return
    end = rec.wait(["done_seen", "failed"], 480)
    if end == "done_seen":
        rec.wait(["ps_gone"], 120)
    if fault != "crash":  # a crashed pod stays (tfhelm's Job keeps its failed pods)
        rec.wait(["victim_gone"], 60)
    m = rec.marks
    for key in ("victim_stopped", "victim_gone", "replacement_running", "done_seen"):
        if key in m:
            row[f"{'done_after_fault' if key == 'done_seen' else key}_s"] = m[key] - t
    # Back in a session: the task's first `start` record after the fault (the example writes
    # one each time a session is made). A PS writes none: worker 0's, the chief that restores.
    again = peerlib.first_after(records(env, ns, "worker-1" if task[0] == "worker" else "worker-0"),
                                "start", rec.wall0 + t)
    if again is not None:
        row["session_again_s"] = again - rec.wall0 - t


def delete_namespace(env: Env, ns: str) -> None:
    env.admin("delete", "namespace", ns, "--wait=true", "--timeout=180s", check=False)
    if ns in env.cl.namespaces:
        env.cl.namespaces.remove(ns)


# ---------------------------------------------------------------- report

def markdown(res: dict) -> str:
    m = res["machine"]
    clients = [c for c, _, _, _ in CLIENTS] + [KCM]
    loads = [(part, peerlib.load_range(res.get(part, []))) for part in ("real", "faults", "kwok")]
    loads = ", ".join(f"{part} {r}" for part, r in loads if r)
    lines = [f"Measured {m['date']} at {m['commit']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; "
             f"Kubernetes {m['kubernetes']} (local: real nodes and kwok nodes), helm {m['helm']}, "
             f"training-operator {res['operator_version']}; load average {m['load_average_at_start']:.1f} at start, "
             f"{res.get('load_average_at_end', 0):.1f} at the end"
             f"{f' (1 min, at the submits: {loads})' if loads else ''}{' (quick run)' if res['quick'] else ''}. "
             f"Median (min–max) of the runs; tfhelm / TFJob, of the medians, < 1 means tfhelm takes less. "
             f"\"Records\" are the example's own (its metrics lines on the logs volume, with the pod's clock, "
             f"the host's); the DNS row is seen to about 1.3 s (CoreDNS is asked a round of names every "
             f"1.3 s, never from a negative answer it cached for the bench); kube-controller-manager does the "
             f"Job, Deployment, ReplicaSet, EndpointSlice and garbage-collection work for both sides.", ""]
    if res.get("format", 1) >= 2:
        tfjob = ("a TFJob as its user would write it for the same image, launcher, script, volumes, "
                 "security contexts and resources (none of tfhelm's PS readiness probe, DNS options, "
                 "tolerations, gRPC keepalive or other chart settings: bench/peerlib.py)")
    else:
        tfjob = "tfhelm's render as a TFJob, its PS readiness probe and DNS options kept (an older run)"
    if res.get("real"):
        lines += [f"**Real nodes**: {REAL['workers']} workers, {REAL['ps']} PS, `examples/ps_between_graph.py "
                  f"--steps {res['steps']}`, {res['reps']} runs each way, alternating. tfhelm: `tfhelm up` with the "
                  f"in-cluster reaper, grace 0. TFJob: `kubectl create -f` of {tfjob} "
                  f"(successPolicy AllWorkers, cleanPodPolicy Running, Worker restartPolicy "
                  f"{res.get('tfjob_worker_restart', 'OnFailure')}, PS {res.get('tfjob_ps_restart', 'Always')}).", ""]
        lines += peerlib.table(res["real"], peerlib.TIME_ROWS + peerlib.COUNT_ROWS, clients)
        failed = [r for r in res["real"] if not r.get("succeeded")]
        if failed:
            lines += ["", "Runs that did not succeed: " + "; ".join(
                f"{r['who']} rep {r['rep']}: {r.get('error') or r.get('marks')}" for r in failed)]
    if res.get("faults"):
        lines += ["", "**Faults** (real nodes, same workload), once worker 0 recorded step 100: a pod deleted "
                  "with `kubectl delete pod`, or worker 1's training process killed in its running pod "
                  "(`kubectl exec` into the container: SIGKILL to the launcher's child, as the OOM killer would; "
                  "the launcher exits 137, the pod is not deleted). Seconds after the fault command starts. "
                  "Stopped: the task's container exited, or its pod is gone. Running again: a new pod of the task "
                  "or the same pod's container restarted. In a session again: the task's first `start` record "
                  "after the fault (the PS writes none: worker 0's). Training done: the job's done condition.", ""]
        lines += peerlib.fault_rows(res["faults"])
        why = [f"{'tfhelm' if r['who'] == 'tfhelm' else 'TFJob'}, {peerlib.FAULTS[r['fault']][0]}: "
               f"{r['failure'].rstrip('.')}" for r in res["faults"] if r.get("failure")]
        if why:
            lines += ["", "Why a job failed (its Failed condition): " + "; ".join(why) + "."]
    for extra in res.get("extra_faults", []):
        lines += ["", f"The same faults with the TFJob's restartPolicy Worker {extra.get('tfjob_worker_restart', 'OnFailure')}, "
                  f"PS {extra.get('tfjob_ps_restart', 'Always')} (run {extra['date']}; tfhelm's rows above):", ""]
        lines += peerlib.fault_rows([r for r in extra["faults"] if r["who"] == "tfjob"])
        why = [f"{peerlib.FAULTS[r['fault']][0]}: {r['failure'].rstrip('.')}"
               for r in extra["faults"] if r.get("failure")]
        if why:
            lines += ["", "Why it failed: " + "; ".join(why) + "."]
    for n in sorted({r["workers"] for r in res.get("kwok", [])}):
        rs = [r for r in res["kwok"] if r["workers"] == n]
        lines += ["", f"**kwok nodes, N = {n:,} workers, {KWOK_PS} PS** (pods stay Running, run nothing):", ""]
        lines += peerlib.table(rs, peerlib.KWOK_TIME_ROWS + peerlib.COUNT_ROWS, clients)
    merged = "".join(f"; with the runs of {m['file']} ({m['date']})" for m in res.get("merged", []))
    lines += ["", f"Bench time: {res['seconds'] / 60:.1f} min{merged}."]
    return "\n".join(lines) + "\n"


def save(res: dict, out: Path, prefix: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{prefix}.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    md = markdown(res) if res.get("machine") else ""
    (out / f"{prefix}.md").write_text(md)
    return md


def update_readme(md: str) -> None:
    readme = REPO / "README.md"
    text = peerlib.replace_between(readme.read_text(), README_BEGIN, README_END, md)
    if text is None:
        log("README.md has no peer bench markers: left alone")
    else:
        readme.write_text(text)
        log("README.md Peer table updated")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/peer.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"kwok N {QUICK_KWOK} instead of {FULL_KWOK}")
    parser.add_argument("--reps", type=int, default=5, help="runs each way on the real nodes (default 5)")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--parts", default="real,faults,kwok", help="which parts to run (comma-separated)")
    parser.add_argument("--sizes", help="kwok N, comma-separated (instead of the defaults)")
    parser.add_argument("--sides", default="tfhelm,tfjob", help="tfhelm, tfjob or both (a trial run)")
    parser.add_argument("--tfjob-worker-restart", default="OnFailure", choices=["OnFailure", "ExitCode", "Never", "Always"],
                        help="the TFJob's Worker restartPolicy (default OnFailure)")
    parser.add_argument("--tfjob-ps-restart", default="Always", choices=["OnFailure", "ExitCode", "Never", "Always"],
                        help="the TFJob's PS restartPolicy (default Always)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's Peer table (a full run does)")
    parser.add_argument("--prefix", help="results file name (default peer, peer-quick)")
    parser.add_argument("--from-json", type=Path, help="measure nothing: write the report of this results file")
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="with --from-json: add the runs of another results file (same settings) to the medians")
    parser.add_argument("--fault-reps", type=int, default=1,
                        help=f"runs each way of each fault ({', '.join(peerlib.FAULTS)}; default 1)")
    parser.add_argument("--extra-faults", type=Path, action="append", default=[],
                        help="with --from-json: add the TFJob fault rows of another run (e.g. --tfjob-worker-restart ExitCode)")
    args = parser.parse_args(argv)
    if args.from_json:
        res = peerlib.upgrade(json.loads(args.from_json.read_text()))
        for f in args.merge:
            more = peerlib.upgrade(json.loads(f.read_text()))
            for part in ("real", "faults", "kwok"):
                res[part] += more.get(part, [])
            res.setdefault("merged", []).append({"file": f.name, "date": more["machine"]["date"]})
        extra = [peerlib.upgrade(json.loads(f.read_text())) for f in args.extra_faults]
        res["extra_faults"] = [dict(e, date=e["machine"]["date"]) for e in extra]
        md = save(res, args.out, args.prefix or args.from_json.stem)
        if args.readme:
            update_readme(md)
        print(md)
        return 0
    parts = set(args.parts.split(","))
    kwok = [int(n) for n in args.sizes.split(",")] if args.sizes else QUICK_KWOK if args.quick else FULL_KWOK
    prefix = args.prefix or ("peer-quick" if args.quick else "peer")
    res: dict = {"format": peerlib.RESULTS_FORMAT, "quick": args.quick, "reps": args.reps, "steps": args.steps,
                 "parts": sorted(parts),
                 "kwok_sizes": kwok, "operator_version": "v1.8.1", "real": [], "faults": [], "kwok": []}
    versions = (REPO / "mk" / "versions.mk").read_text()
    res["operator_version"] = next((line.split(":=")[1].strip() for line in versions.splitlines()
                                    if line.startswith("TRAINING_OPERATOR_VERSION")), "?")
    SIDES[:] = args.sides.split(",")
    TFJOB_RESTART[:] = [args.tfjob_worker_restart, args.tfjob_ps_restart]
    res["tfjob_worker_restart"], res["tfjob_ps_restart"] = TFJOB_RESTART
    for f in (OPERATOR_BIN, TFJOB_CRD) if "tfjob" in SIDES else ():
        if not f.is_file():
            sys.exit(f"{f} missing: run `make training-operator`")
    pods = sum(2 * (n + KWOK_PS) for n in kwok) if "kwok" in parts else 16
    cl = scale.Cluster(pods, real=localnode.MAX_NODES)
    env = None
    try:
        res["machine"] = scale.machine(cl.kubectl)
        with tempfile.TemporaryDirectory() as tmp:
            env = Env(cl, Path(tmp), tfjob="tfjob" in SIDES)
            if "real" in parts:
                for i in range(args.reps):
                    for who in order(i):
                        res["real"].append(one_run(env, who, real=True, steps=args.steps, rep=i, **REAL))
                        save(res | {"seconds": time.monotonic() - scale.T0}, args.out, prefix)
            if "faults" in parts:
                for i, fault in enumerate(list(peerlib.FAULTS) * args.fault_reps):
                    for who in order(i):
                        res["faults"].append(one_run(env, who, real=True, steps=args.steps, fault=fault,
                                                     rep=i // len(peerlib.FAULTS), **REAL))
                        save(res | {"seconds": time.monotonic() - scale.T0}, args.out, prefix)
            if "kwok" in parts:
                values = Path(tmp) / "bench-values.yaml"
                values.write_text(yaml.safe_dump(scale.BENCH_VALUES))
                for i, n in enumerate(kwok):
                    for who in order(i):
                        res["kwok"].append(one_run(env, who, real=False, workers=n, ps=KWOK_PS, values=values))
                        save(res | {"seconds": time.monotonic() - scale.T0}, args.out, prefix)
            if env.operator:
                res["operator_log_tail"] = env.operator.log_path.read_text(errors="replace")[-3000:]
            env.close()
            env = None
    finally:
        if env:
            env.close()
        cl.down()
    res["load_average_at_end"] = os.getloadavg()[0]
    res["seconds"] = time.monotonic() - scale.T0
    md = save(res, args.out, prefix)
    if args.readme or not args.quick:
        update_readme(md)
    print(md)
    log(f"wrote {args.out}/{prefix}.json, .md in {res['seconds'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
