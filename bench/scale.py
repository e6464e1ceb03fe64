"""tfhelm at scale, side by side with the per-task baseline (bench/baseline.py) and plain Helm.

    python bench/scale.py [--quick] [--out bench/results] [--skip-cluster]
    make bench | make bench-quick

Everything goes through the command lines a user runs (`tfhelm`, `helm`, `kubectl`), never
tfhelm's internals, so the bench measures whatever the code on the branch does. One run
measures every column, so ratios compare like with like on the same (shared) machine.

Per N workers (PS = N/64, at least 1, at most 64; the baseline gets the same PS):
  * render: wall time of `tfhelm render` (both releases), `helm template` of the same values
    (`tfhelm render --values-only --one-release`), and the baseline generator (in-process);
    bytes, objects, largest object (compact JSON, what the API server receives), the
    config ConfigMap(s);
  * stored release: what Helm keeps per revision, the release Secret's data =
    base64(gzip(release JSON)). tfhelm: Helm's own release JSON (`helm install --dry-run -o
    json` of each release's values) encoded the same way (gzip level 9 like Helm), checked
    against the real Secrets at the N installed on the cluster. Baseline: the manifest alone
    (no chart, values or metadata), so a lower bound; generated up to a byte budget and
    extrapolated beyond it (marked ~);
  * on the local cluster (kwok nodes, own namespace per run, all kept until the end):
    seconds until every pod is Running after `tfhelm up` and after plain `helm install` of
    the same values (which goes first alternates with N), and when each command returned;
    real stored release bytes;
  * at one N: wall, CPU seconds and max RSS of `tfhelm up --wait` (pods complete after a
    simulated 30 s), `tfhelm status` vs `kubectl get pods`;
  * CLI startup: `tfhelm --help` vs `helm version`.

Writes <out>/<prefix>.json, .md and .png (stored release and objects vs N); the full run
also rewrites README.md's Scale table (between the bench markers). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import gzip
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import baseline  # noqa: E402

CHART = REPO / "charts" / "tf-cluster"
NAME = "bench"
STATIC_NS = "bench"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
FULL = {"static": [8, 64, 512, 2048, 10_000, 100_000], "cluster": [8, 1024, 4096],
        "resources": 1024}
QUICK = {"static": [8, 512, 10_000], "cluster": [8, 512], "resources": 256}
PODS_PER_NODE = 250  # tfhelm_dev.localcluster's kwok nodes
# Small requests so thousands of pods fit the kwok nodes; workers stay Running (kwok would
# complete Job pods after 3 s) unless a run says otherwise.
BENCH_VALUES = {
    "worker": {"podAnnotations": {"tfhelm.io/kwok-complete-after": "1h"},
               "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}},
    "ps": {"resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}},
}
README_BEGIN, README_END = "<!-- bench:scale -->", "<!-- /bench:scale -->"
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def ps_for(n: int) -> int:
    return min(64, max(1, n // 64))


# ---------------------------------------------------------------- processes

@dataclass
class Run:
    rc: int
    out: str
    err: str
    wall: float
    cpu: float       # user + system seconds of the process and the children it waited for
    rss_mib: float   # max RSS of the largest process in that tree

    def first_error(self) -> str:
        lines = [line for line in self.err.splitlines() if line.strip()]
        return (lines[-1] if lines else f"exit {self.rc}")[:200]


def run(cmd: list, timeout: float = 1800, env: dict | None = None) -> Run:
    """Run cmd, measuring wall time and (wait4) its CPU time and max RSS."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, env=env)
        timer = threading.Timer(timeout, proc.kill)
        timer.daemon = True  # an interrupted bench must not wait out the timeout before exiting
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(proc.returncode, out.read(), err.read(), wall, usage.ru_utime + usage.ru_stime,
                   usage.ru_maxrss / 1024)


def median_run(cmd: list, reps: int) -> Run:
    runs = [run(cmd) for _ in range(reps)]
    best = sorted(runs, key=lambda r: r.wall)[len(runs) // 2]
    return best


def tool(name: str) -> str:
    found = shutil.which(name) or (shutil.which(name, path=str(Path(sys.executable).parent)))
    if not found:
        sys.exit(f"{name} not found on PATH; run `make install` (the bench targets set PATH)")
    return found


TFHELM, HELM = tool("tfhelm"), tool("helm")


def stored_bytes(release_json: bytes) -> int:
    """Helm's encoding of a release in its Secret: base64(gzip(JSON)), best compression."""
    return len(base64.b64encode(gzip.compress(release_json, compresslevel=9, mtime=0)))


def release_values(text: str) -> dict[str, str]:
    """`tfhelm render --values-only` output, per release: {release: values YAML}."""
    out = {}
    for chunk in text.split("---\n"):
        m = re.match(r"# release: (\S+)", chunk)
        if m:
            out[m.group(1)] = chunk
    return out


# ---------------------------------------------------------------- static: render and sizes

def manifest_stats(text: str) -> dict:
    docs = [d for d in yaml.load_all(text, Loader=LOADER) if d]
    sizes = [len(json.dumps(d, separators=(",", ":"))) for d in docs]
    cms = [(d, s) for d, s in zip(docs, sizes) if d.get("kind") == "ConfigMap"]
    config = [s for d, s in cms
              if (d.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/component") == "config"]
    return {"objects": len(docs), "largest": max(sizes, default=0),
            "configmap": max(config or [s for _, s in cms], default=0)}


def static_row(n: int) -> dict:
    p = ps_for(n)
    reps = 3 if n <= 2048 else 1
    row: dict = {"n": n, "ps": p}
    shape = ["-n", STATIC_NS, "-w", n, "--ps", p, "--set", "reaper.enabled=false"]

    r = median_run([TFHELM, "render", NAME, *shape], reps)
    if r.rc != 0:
        row["tfhelm_error"] = r.first_error()
        log(f"N={n}: tfhelm render failed (exit {r.rc}): {row['tfhelm_error']}")
    else:
        row.update(tfhelm_render_s=r.wall, tfhelm_bytes=len(r.out.encode()),
                   **{f"tfhelm_{k}": v for k, v in manifest_stats(r.out).items()})
        # Helm's release JSON of each release `tfhelm up` installs, encoded as Helm stores it.
        values = run([TFHELM, "render", NAME, *shape, "--values-only"])
        sizes = []
        releases = release_values(values.out)
        if not releases:
            row["stored_error"] = f"no release in `tfhelm render --values-only`: {values.first_error()}"
        with tempfile.TemporaryDirectory() as tmp:
            for release, text in releases.items():
                f = Path(tmp) / f"{release}.yaml"
                f.write_text(text)
                dry = run([HELM, "install", release, CHART, "-n", STATIC_NS, "-f", f,
                           "--dry-run=client", "-o", "json"])
                if dry.rc != 0:
                    row["stored_error"] = dry.first_error()
                    break
                sizes.append(stored_bytes(json.dumps(json.loads(dry.out), separators=(",", ":")).encode()))
            else:
                if releases:  # each release stores the chart once: the target is per release
                    row.update(tfhelm_stored=sum(sizes), tfhelm_stored_largest=max(sizes))
            one = run([TFHELM, "render", NAME, *shape, "--values-only", "--one-release"])
            f = Path(tmp) / "one.yaml"
            f.write_text(one.out)
            h = median_run([HELM, "template", NAME, CHART, "-n", STATIC_NS, "-f", f], reps)
            if h.rc == 0:
                row.update(helm_template_s=h.wall, helm_template_bytes=len(h.out.encode()))
            else:
                row["helm_error"] = h.first_error()
    b = baseline.measure(NAME, STATIC_NS, n, p)
    row.update(baseline_render_s=b.seconds, baseline_bytes=b.bytes, baseline_objects=b.objects,
               baseline_largest=b.largest, baseline_stored=b.stored, baseline_exact=b.exact)
    log(f"N={n} (PS {p}): tfhelm render {fmt_s(row.get('tfhelm_render_s'))}, "
        f"helm template {fmt_s(row.get('helm_template_s'))}; objects "
        f"{row.get('tfhelm_objects')} vs {b.objects}; stored {fmt_bytes(row.get('tfhelm_stored'))} "
        f"vs {'' if b.exact else '~'}{fmt_bytes(b.stored)}")
    return row


# ---------------------------------------------------------------- the local cluster

class Cluster:
    """The local cluster (tfhelm_dev.localcluster), started with enough kwok nodes if needed."""

    def __init__(self, pods: int, real: int | None = None):
        """`real`: the real nodes to run (None: none if the bench starts the cluster, else
        those it already has; a running cluster with other real nodes is restarted)."""
        from kubernetes import client, config

        from tfhelm_dev import localcluster

        self.lc = localcluster
        nodes = math.ceil(pods * 1.1 / PODS_PER_NODE) + 2  # + the tainted user node
        self.started = localcluster.status() is None
        if real is None:
            real = 0 if self.started else len(localcluster.real_nodes())  # never restart someone's nodes
        elif not self.started and real != len(localcluster.real_nodes()):
            self.started = True  # up() restarts it with `real` nodes: stop it at the end
        log(f"local cluster: {'starting' if self.started else 'using'} it with {nodes} kwok nodes"
            f"{f' and {real} real nodes' if real else ''}")
        info = localcluster.up(nodes=nodes, real=real)
        self.kubeconfig = str(info.kubeconfig)
        os.environ["KUBECONFIG"] = self.kubeconfig
        self.kubectl = str(localcluster.bin_dir() / "kubectl")
        self.api = config.new_client_from_config(config_file=self.kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.client = client
        self.namespaces: list[str] = []

    def down(self) -> None:
        """Remove what the bench made: the whole cluster if it started it, else its namespaces
        (Jobs first: the namespace controller deletes their pods but leaves the Jobs, whose
        tracking finalizer then holds the pods, and the namespace, until the Job is gone)."""
        if self.started:
            log("stopping the local cluster the bench started")
            self.lc.down()
            return
        log(f"deleting the bench's namespaces: {', '.join(self.namespaces)}")
        for ns in self.namespaces:
            self.client.BatchV1Api(self.api).delete_collection_namespaced_job(
                ns, propagation_policy="Background")
            self.core.delete_namespace(ns)

    def namespace(self, kind: str, n: int, simulated: bool = True) -> str:
        """A fresh namespace enforcing Pod Security "restricted"; its pods go to the kwok
        nodes (simulated) or, without the annotations, to the real nodes."""
        c = self.client
        name = f"bench-{kind}-{n}-{uuid.uuid4().hex[:5]}"
        labels = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn", "audit")}
        annotations = self.lc.SIMULATED_NAMESPACE_ANNOTATIONS if simulated else None
        self.core.create_namespace(c.V1Namespace(metadata=c.V1ObjectMeta(
            name=name, labels=labels, annotations=annotations)))
        self._until(lambda: self._exists(lambda: self.core.read_namespaced_service_account("default", name)),
                    60, f"serviceaccount {name}/default")
        self.namespaces.append(name)
        return name

    def stored_release_bytes(self, ns: str) -> int:
        secrets = self.core.list_namespaced_secret(ns, label_selector="owner=helm").items
        return sum(len(base64.b64decode(s.data["release"])) for s in secrets)

    def _exists(self, read) -> bool:
        try:
            read()
            return True
        except self.client.ApiException as e:
            if e.status == 404:
                return False
            raise

    @staticmethod
    def _until(check, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.5)

    def time_to_running(self, ns: str, target: int, start, timeout: float) -> tuple[Run, float | None]:
        """Start the install (start() -> Run, in this thread) while a raw watch of the
        namespace's Running pods (a field selector: only pods entering or leaving Running)
        counts them; returns the install's Run and seconds until `target` pods ran."""
        running: set[str] = set()
        done = threading.Event()
        reached: list[float] = []
        t0 = time.perf_counter()

        def relist() -> str:
            pods = self.core.list_namespaced_pod(ns, field_selector="status.phase=Running")
            running.clear()
            running.update(p.metadata.name for p in pods.items)
            return pods.metadata.resource_version

        def watch():
            rv = relist()
            while not done.is_set():
                resp = self.core.list_namespaced_pod(
                    ns, field_selector="status.phase=Running", watch=True, resource_version=rv,
                    allow_watch_bookmarks=True, timeout_seconds=30, _preload_content=False)
                buf = b""
                for chunk in resp.stream(65536):
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        ev = json.loads(line)
                        if ev["type"] == "ERROR":  # e.g. 410 Gone: start over from a list
                            rv = relist()
                            continue
                        meta = ev["object"].get("metadata", {})
                        rv = meta.get("resourceVersion", rv)
                        if ev["type"] == "ADDED":
                            running.add(meta["name"])
                        elif ev["type"] == "DELETED":
                            running.discard(meta["name"])
                        if len(running) >= target and not reached:
                            reached.append(time.perf_counter() - t0)
                            done.set()
                    if done.is_set():
                        break
                resp.release_conn()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(0.2)  # the watch is open before the install starts
        t0 = time.perf_counter()
        result = start()
        if result.rc == 0:
            done.wait(timeout)
        done.set()
        return result, (reached[0] if reached else None)


def install_runs(cl: Cluster, n: int, values: Path, order: int) -> dict:
    p = ps_for(n)
    target = n + p
    timeout = 120 + n / 5
    row: dict = {"n": n, "ps": p}
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "one.yaml"
        r = run([TFHELM, "render", NAME, "-n", "x", "-w", n, "--ps", p, "-f", values,
                 "--set", "reaper.enabled=false", "--values-only", "--one-release"])
        one.write_text(r.out)
        commands = {
            "helm": lambda ns: [HELM, "install", NAME, CHART, "-n", ns, "-f", one],
            "tfhelm": lambda ns: [TFHELM, "up", "--name", NAME, "-n", ns, "-w", n, "--ps", p, "-f", values],
        }
        for kind in (["helm", "tfhelm"] if order % 2 == 0 else ["tfhelm", "helm"]):
            ns = cl.namespace(kind, n)
            log(f"N={n}: {kind} install, waiting for {target} pods Running (namespace {ns})")
            res, secs = cl.time_to_running(ns, target, lambda: run(commands[kind](ns), timeout=timeout),
                                           timeout)
            if res.rc != 0:
                row[f"{kind}_error"] = res.first_error()
                log(f"N={n}: {kind} failed (exit {res.rc}): {row[f'{kind}_error']}")
            row[f"{kind}_returned_s"] = res.wall
            row[f"{kind}_running_s"] = secs
            row[f"{kind}_stored_real"] = cl.stored_release_bytes(ns)
            log(f"N={n}: {kind} returned after {res.wall:.1f}s, all Running after "
                f"{'-' if secs is None else f'{secs:.1f}s'}")
    return row


def resource_runs(cl: Cluster, n: int, values: Path) -> dict:
    p = ps_for(n)
    ns = cl.namespace("wait", n)
    usage = lambda r: {"wall_s": r.wall, "cpu_s": r.cpu, "rss_mib": r.rss_mib, "rc": r.rc}  # noqa: E731
    log(f"N={n}: tfhelm up --wait (workers complete 30 s after they start)")
    with tempfile.TemporaryDirectory() as tmp:
        done_values = Path(tmp) / "complete.yaml"
        done_values.write_text(yaml.safe_dump({"worker": {"podAnnotations": {"tfhelm.io/kwok-complete-after": "30s"}}}))
        up = run([TFHELM, "up", "--wait", "--timeout", 900, "--name", NAME, "-n", ns, "-w", n, "--ps", p,
                  "-f", values, "-f", done_values], timeout=1000)
    out = {"n": n, "ps": p, "up_wait": usage(up)}
    if up.rc != 0:
        out["up_wait"]["error"] = up.first_error()
    log(f"N={n}: up --wait: {up.wall:.1f}s wall, {up.cpu:.1f}s CPU, {up.rss_mib:.0f} MiB (exit {up.rc})")
    out["status"] = usage(median_run([TFHELM, "status", NAME, "-n", ns], 3))
    out["kubectl_get_pods"] = usage(median_run([cl.kubectl, "get", "pods", "-n", ns], 3))
    log(f"N={n}: tfhelm status {out['status']['wall_s']:.2f}s vs kubectl get pods "
        f"{out['kubectl_get_pods']['wall_s']:.2f}s")
    return out


def startup() -> dict:
    tf, helm = median_run([TFHELM, "--help"], 5), median_run([HELM, "version"], 5)
    log(f"startup: tfhelm --help {tf.wall:.3f}s, helm version {helm.wall:.3f}s")
    return {"tfhelm_help_s": tf.wall, "tfhelm_help_cpu_s": tf.cpu, "helm_version_s": helm.wall,
            "helm_version_cpu_s": helm.cpu}


# ---------------------------------------------------------------- machine and report

def machine(kubectl: str | None) -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal"))
    helm_v = run([HELM, "version", "--template", "{{.Version}}"]).out.strip()
    k8s = None
    if kubectl:
        v = run([kubectl, "version", "-o", "json"])
        if v.rc == 0:
            k8s = json.loads(v.out).get("serverVersion", {}).get("gitVersion")
    tfhelm_v = run([TFHELM, "--version"]).out.strip()
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 2**20, 1),
            "kernel": platform.release(), "python": platform.python_version(), "helm": helm_v,
            "kubernetes": k8s, "tfhelm": tfhelm_v, "commit": commit,
            "load_average_at_start": os.getloadavg()[0],
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def fmt_bytes(b) -> str:
    if b is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b} B"


def fmt_s(s) -> str:
    if s is None:
        return "-"
    return f"{s * 1000:.1f} ms" if s < 0.1 else f"{s:.2f} s" if s < 100 else f"{s:.0f} s"


def ratio(a, b) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}×"


def targets(res: dict) -> list[tuple[str, str, str]]:
    """(target, measured, met?) for the issue's targets, from this run's numbers."""
    rows = []
    static = {r["n"]: r for r in res["static"]}
    big = static.get(100_000)
    if big:
        v = big.get("tfhelm_stored_largest")
        rows.append(("stored release < 80 KiB at N=100,000",
                     f"{fmt_bytes(v)} (largest release; both: {fmt_bytes(big['tfhelm_stored'])})" if v
                     else big.get("tfhelm_error", big.get("stored_error", "-")),
                     "met" if v and v < 80 * 1024 else "missed"))
    largest = [(r.get("tfhelm_largest"), r["n"]) for r in res["static"] if r.get("tfhelm_largest")]
    if largest:
        worst = max(largest)
        ok = worst[0] < 256 * 1024 and len(largest) == len(res["static"])
        rows.append(("largest object < 256 KiB at any N",
                     f"{fmt_bytes(worst[0])} (N={worst[1]:,})" + ("" if len(largest) == len(res["static"])
                                                                   else "; some N did not render"),
                     "met" if ok else "missed"))
    for r in res.get("cluster", []):
        if r["n"] in (1024, 4096):
            q = (r["tfhelm_running_s"] / r["helm_running_s"]
                 if r.get("tfhelm_running_s") and r.get("helm_running_s") else None)
            rows.append((f"up → all Running ≤ 1.05× helm install at N={r['n']:,}",
                         "-" if q is None else f"{q:.2f}×", "-" if q is None else "met" if q <= 1.05 else "missed"))
    rr = res.get("resources")
    if rr and rr["n"] == 1024:
        cpu = rr["up_wait"]["cpu_s"]
        rows.append(("`up --wait` CPU at N=1,024 < 5 s", f"{cpu:.1f} s", "met" if cpu < 5 else "missed"))
        q = rr["status"]["wall_s"] / rr["kubectl_get_pods"]["wall_s"]
        rows.append(("`status` ≤ 2× `kubectl get pods` at N=1,024", f"{q:.2f}×", "met" if q <= 2 else "missed"))
    s = res.get("startup")
    if s:
        rows.append(("`tfhelm --help` ≤ 0.2 s", f"{s['tfhelm_help_s']:.2f} s",
                     "met" if s["tfhelm_help_s"] <= 0.2 else "missed"))
    return rows


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [f"Measured {m['date']} at {m['commit']} on {m['cpu']}, {m['cores']} cores, "
             f"{m['memory_gib']} GiB, Linux {m['kernel']}; helm {m['helm']}, Kubernetes "
             f"{m['kubernetes'] or '-'} (local, kwok nodes), Python {m['python']}; load average "
             f"{m['load_average_at_start']:.1f} at start{' (quick run)' if res['quick'] else ''}. "
             f"PS = N/64 (1-64). tfhelm = both releases `tfhelm up` installs; per-task = "
             f"bench/baseline.py (~: extrapolated).", "",
             "| workers N | PS | objects tfhelm / per-task | rendered bytes tfhelm / per-task "
             "| largest object tfhelm / per-task | stored release tfhelm (largest release) / per-task | config ConfigMap "
             "| render s: tfhelm / helm template / per-task |",
             "|---:|---:|---|---|---|---|---:|---|"]
    for r in res["static"]:
        est = "" if r["baseline_exact"] else "~"
        if "tfhelm_error" in r:
            tf = {k: "refused" for k in ("objects", "bytes", "largest", "stored", "configmap", "render")}
            tf["render"] = f"refused: {r['tfhelm_error'][:80]}"
        else:
            tf = {"objects": f"{r['tfhelm_objects']:,}", "bytes": fmt_bytes(r["tfhelm_bytes"]),
                  "largest": fmt_bytes(r["tfhelm_largest"]), "stored": f"{fmt_bytes(r.get('tfhelm_stored'))} ({fmt_bytes(r.get('tfhelm_stored_largest'))})",
                  "configmap": fmt_bytes(r["tfhelm_configmap"]), "render": fmt_s(r["tfhelm_render_s"])}
        lines.append(
            f"| {r['n']:,} | {r['ps']} | {tf['objects']} / {r['baseline_objects']:,} "
            f"| {tf['bytes']} / {est}{fmt_bytes(r['baseline_bytes'])} "
            f"| {tf['largest']} / {fmt_bytes(r['baseline_largest'])} "
            f"| {tf['stored']} / {est}{fmt_bytes(r['baseline_stored'])} | {tf['configmap']} "
            f"| {tf['render']} / {fmt_s(r.get('helm_template_s'))} / {est}{fmt_s(r['baseline_render_s'])} |")
    if res.get("cluster"):
        lines += ["", "Up on the local cluster (kwok nodes), until every pod is Running; \"returned\": "
                  "when the command exited. Stored release: the real Secrets.", "",
                  "| workers N | PS | tfhelm up → Running | helm install → Running | ratio "
                  "| tfhelm up returned | helm install returned | stored: tfhelm / helm |",
                  "|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in res["cluster"]:
            lines.append(
                f"| {r['n']:,} | {r['ps']} | {fmt_s(r.get('tfhelm_running_s'))} | {fmt_s(r.get('helm_running_s'))} "
                f"| {ratio(r.get('tfhelm_running_s'), r.get('helm_running_s'))} "
                f"| {fmt_s(r.get('tfhelm_returned_s'))} | {fmt_s(r.get('helm_returned_s'))} "
                f"| {fmt_bytes(r.get('tfhelm_stored_real'))} / {fmt_bytes(r.get('helm_stored_real'))} |")
    rr = res.get("resources")
    if rr:
        lines += ["", f"At N={rr['n']:,} (PS {rr['ps']}): wall, CPU (user+system, with children) and max "
                  "RSS of one process tree; status and get pods: median of 3.", "",
                  "| command | wall | CPU | max RSS |", "|---|---:|---:|---:|"]
        for label, k in (("`tfhelm up --wait`", "up_wait"), ("`tfhelm status`", "status"),
                         ("`kubectl get pods`", "kubectl_get_pods")):
            u = rr[k]
            lines.append(f"| {label} | {fmt_s(u['wall_s'])} | {fmt_s(u['cpu_s'])} | {u['rss_mib']:.0f} MiB |")
    s = res.get("startup")
    if s:
        lines += ["", f"CLI startup (median of 5): `tfhelm --help` {s['tfhelm_help_s']:.3f} s, "
                  f"`helm version` {s['helm_version_s']:.3f} s ({ratio(s['tfhelm_help_s'], s['helm_version_s'])})."]
    t = targets(res)
    if t:
        lines += ["", "| target (issue #14) | measured | |", "|---|---|---|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in t]
    lines += ["", f"Bench time: {res['seconds'] / 60:.1f} min."]
    return "\n".join(lines) + "\n"


def plot(res: dict, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no plot (`make bench` installs it)")
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in ((axes[0], "stored", "stored release (bytes)"), (axes[1], "objects", "objects")):
        for who, label, style in (("tfhelm", "tfhelm", "o-"), ("baseline", "per-task baseline", "s--")):
            pts = [(r["n"], r[f"{who}_{key}"]) for r in res["static"] if r.get(f"{who}_{key}")]
            if pts:
                ax.plot(*zip(*pts), style, label=label)
            est = [(r["n"], r[f"{who}_{key}"]) for r in res["static"]
                   if who == "baseline" and key == "stored" and not r["baseline_exact"]]
            if est:
                ax.plot(*zip(*est), "s", mfc="white", color="C1", label="extrapolated")
        if key == "stored":
            ax.axhline(1 << 20, color="grey", lw=0.8, ls=":")
            ax.text(res["static"][0]["n"], 1.2 * (1 << 20), "Helm's 1 MiB Secret", fontsize=8, color="grey")
            ax.axhline(80 << 10, color="green", lw=0.8, ls=":")
            ax.text(res["static"][0]["n"], 1.2 * (80 << 10), "80 KiB target", fontsize=8, color="green")
        ax.set(xscale="log", yscale="log", xlabel="workers N", title=title)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def update_readme(md: str) -> None:
    readme = REPO / "README.md"
    text = readme.read_text()
    if README_BEGIN not in text:
        log("README.md has no bench markers: left alone")
        return
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    readme.write_text(f"{head}{README_BEGIN}\n{md}{README_END}{tail}")
    log("README.md Scale table updated")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/scale.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK} instead of {FULL}")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--skip-cluster", action="store_true", help="only what needs no cluster")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    prefix = "scale-quick" if args.quick else "scale"
    res: dict = {"quick": args.quick, "sizes": sizes}
    log(f"bench: {'quick' if args.quick else 'full'} run; sizes {sizes}")
    # Every run keeps its namespace until the end: deleting thousands of pods takes the
    # controllers minutes (their API rate limits) and would load the next measurement.
    pods = sum(2 * (n + ps_for(n)) for n in sizes["cluster"]) + sizes["resources"] + ps_for(sizes["resources"])
    cl = None if args.skip_cluster else Cluster(pods)
    try:
        res["machine"] = machine(cl.kubectl if cl else None)
        res["startup"] = startup()
        with tempfile.TemporaryDirectory() as tmp:
            values = Path(tmp) / "bench-values.yaml"
            values.write_text(yaml.safe_dump(BENCH_VALUES))
            res["static"] = [static_row(n) for n in sizes["static"]]
            if cl:
                res["cluster"] = [install_runs(cl, n, values, i) for i, n in enumerate(sizes["cluster"])]
                res["resources"] = resource_runs(cl, sizes["resources"], values)
    finally:
        if cl:
            cl.down()
    res["seconds"] = time.monotonic() - T0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{prefix}.json").write_text(json.dumps(res, indent=1) + "\n")
    md = markdown(res)
    (args.out / f"{prefix}.md").write_text(md)
    plot(res, args.out / f"{prefix}.png")
    if not args.quick and not args.skip_cluster:
        update_readme(md)
    print(md)
    log(f"wrote {args.out}/{prefix}.json, .md, .png in {res['seconds'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
