"""The pure parts of the peer bench (bench/peer.py): the TFJob its user would write, built from
tfhelm's own render, which task a pod is, the training times from the example's own records,
the crash-in-place command, DNS queries as bytes, request counts from the API server's metrics,
and the tables. No I/O here, so tests/unit/test_bench_peer.py can check all of it in milliseconds.
"""

from __future__ import annotations

import copy
import json
import re
import statistics
import struct

from tfhelm import contract

TFJOB_API = "kubeflow.org/v1"
# TFJob's replica types as its API spells them, and the task types in TF_CONFIG.
REPLICA_TYPES = {"worker": "Worker", "ps": "PS"}
# The only TFHELM_* variables a TFJob's pods keep: the example script's own inputs (where its
# data, logs and checkpoints go), which its user writes for it whatever runs it. Every other one
# is tfhelm's: what a TFJob sets itself (task type and index, the cluster spec file), names of
# tfhelm's objects, or a chart setting (stop delay, metrics port, retried errors...).
SCRIPT_ENV = {contract.env(k) for k in ("dataDir", "logDir", "checkpointDir")}
# Not TFHELM_* but the chart's too: gRPC keepalive, so a task notices a silent peer sooner.
CHART_ENV = {"TF_GRPC_DEFAULT_OPTIONS"}
# The chart's pod settings a TFJob user would not write: the DNS tuning (ndots 1), the short
# not-ready/unreachable tolerations, Service links off, the grace period (the default anyway).
CHART_POD_FIELDS = ("dnsConfig", "tolerations", "enableServiceLinks", "terminationGracePeriodSeconds")
# ... and the tensorflow container's: the PS readiness probe (a TFJob's per-task Service
# publishes only Ready pods: the probe would delay the TFJob's names, not tfhelm's), the
# termination message fallback.
CHART_CONTAINER_FIELDS = ("readinessProbe", "startupProbe", "livenessProbe", "terminationMessagePolicy")
TFHELM_LABEL_PREFIXES = (contract.CLUSTER_LABEL.split("/")[0] + "/", "app.kubernetes.io/", "helm.sh/")
SUPPORT_KINDS = ("ServiceAccount", "ConfigMap", "PersistentVolumeClaim")


# ---------------------------------------------------------------- the TFJob

def _component(doc: dict) -> str | None:
    return ((doc.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component")


def _is_hook(doc: dict) -> bool:
    return "helm.sh/hook" in ((doc.get("metadata") or {}).get("annotations") or {})


def tfjob_template(template: dict) -> dict:
    """A pod template of tfhelm's render as a TFJob user would write it for the same script.

    Kept, so only the controllers differ: the image, the command (tfhelm's launcher, mounted
    from its ConfigMap: it reads the TF_CONFIG the TFJob sets and runs the script in a child
    process, as in tfhelm's pods), the script and its arguments, the script's environment
    (SCRIPT_ENV, HOME, PYTHONUNBUFFERED), volumes and mounts, pod and container security
    contexts, no service account token, resources, the TensorFlow port (named `tfjob-port`,
    as TFJob wants it).

    Dropped: what the TFJob sets itself (restartPolicy, the Job's subdomain, task index and
    type), tfhelm's labels and checksum annotations (no tfhelm tool takes these pods for its
    own), and the chart's tuning a TFJob user would not write (CHART_POD_FIELDS,
    CHART_CONTAINER_FIELDS, CHART_ENV, every other TFHELM_* variable, the metrics port that
    nothing serves without TFHELM_METRICS_PORT). Carried over (before issue #32), the PS
    readiness probe delayed the TFJob's names: its per-task Services publish only Ready pods."""
    t = copy.deepcopy(template)
    meta = t.setdefault("metadata", {})
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items()
                      if not k.startswith(TFHELM_LABEL_PREFIXES)}
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items()
                           if not k.startswith("checksum/")}
    for key in ("labels", "annotations"):
        if not meta[key]:
            del meta[key]
    spec = t["spec"]
    for key in ("restartPolicy", "subdomain", *CHART_POD_FIELDS):
        spec.pop(key, None)
    for c in spec["containers"]:
        if c["name"] != "tensorflow":
            continue
        for key in CHART_CONTAINER_FIELDS:
            c.pop(key, None)
        c["env"] = [e for e in c.get("env", []) if e["name"] in SCRIPT_ENV
                    or not (e["name"].startswith("TFHELM_") or e["name"] in CHART_ENV)]
        c["ports"] = [dict(p, name="tfjob-port") for p in c.get("ports", []) if p.get("name") == "tf"]
    return t


def tfjob_manifests(docs: list[dict], name: str, namespace: str, workers: int, ps: int,
                    worker_restart: str = "OnFailure", ps_restart: str = "Always") -> list[dict]:
    """The TFJob twin of a tfhelm render (both releases' documents): its ConfigMaps (the code,
    the launcher), PVCs and ServiceAccount as they are, then one TFJob whose Worker and PS
    templates are the worker Job's and the first PS Deployment's pod templates.

    TFJob settings chosen to do what tfhelm does: training is done when every worker
    succeeded (successPolicy AllWorkers; the default is worker 0), the PS are deleted then
    (cleanPodPolicy Running; the default None leaves them running forever), a failed worker
    is restarted (OnFailure, or `worker_restart`: ExitCode retries exit codes from 128 on,
    i.e. signals, and fails at once on the others) up to 3 times per worker, a PS always
    (Always, or `ps_restart`)."""
    worker = next(d for d in docs if d.get("kind") == "Job" and _component(d) == "worker")
    support = [d for d in docs if d.get("kind") in SUPPORT_KINDS and not _is_hook(d)
               and _component(d) != "reaper"]
    specs = {"Worker": {"replicas": workers, "restartPolicy": worker_restart,
                        "template": tfjob_template(worker["spec"]["template"])}}
    if ps:
        first_ps = next(d for d in docs if d.get("kind") == "Deployment" and _component(d) == "ps")
        specs["PS"] = {"replicas": ps, "restartPolicy": ps_restart,
                       "template": tfjob_template(first_ps["spec"]["template"])}
    tfjob = {"apiVersion": TFJOB_API, "kind": "TFJob",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3 * workers},
                      "successPolicy": "AllWorkers", "tfReplicaSpecs": specs}}
    out = []
    for d in support:
        d = copy.deepcopy(d)
        d["metadata"]["namespace"] = namespace
        out.append(d)
    return out + [tfjob]


# ---------------------------------------------------------------- pods and TF_CONFIG

def task_of(pod: dict) -> tuple[str, int] | None:
    """(task type, index) of a pod of either kind: tfhelm's (component label; the Job's
    completion index or the PS index label) or a TFJob's (replica type and index labels)."""
    meta = pod.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if "training.kubeflow.org/replica-type" in labels:
        role = labels["training.kubeflow.org/replica-type"].lower()
        index = labels.get("training.kubeflow.org/replica-index")
    else:
        role = labels.get("app.kubernetes.io/component")
        index = (annotations.get("batch.kubernetes.io/job-completion-index")
                 if role != "ps" else labels.get(contract.TASK_INDEX_LABEL))
    if role not in ("worker", "ps", "chief", "evaluator") or index is None or not str(index).isdigit():
        return None
    return role, int(index)


def pod_tf_config(pod: dict) -> dict | None:
    """The TF_CONFIG a pod's tensorflow container has in its spec (TFJob's pods), else None."""
    for c in (pod.get("spec") or {}).get("containers", []):
        for e in c.get("env") or []:
            if e.get("name") == "TF_CONFIG" and e.get("value"):
                return json.loads(e["value"])
    return None


def dns_names(tf_config: dict, domain: str = "cluster.local") -> list[str]:
    """The names a task looks up for TF_CONFIG's hosts, as its resolver reaches them: a host
    under the cluster domain as it is; a shorter one (TFJob's `<job>-<type>-<i>.<ns>.svc`)
    through the pod's search path, which ends in the cluster domain."""
    names = []
    for hosts in tf_config["cluster"].values():
        for h in hosts:
            host = h.rsplit(":", 1)[0].rstrip(".")
            names.append(host if host.endswith("." + domain) else f"{host}.{domain}")
    return sorted(set(names))


# ---------------------------------------------------------------- the example's own records

def parse_records(text: str) -> list[dict]:
    """The example's metrics lines (examples/tfhelm_example.py, Metrics: one JSON object a
    line with `event`, `task` and `time`, the pod's wall clock); a line half written is left out."""
    out = []
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and isinstance(r.get("time"), (int, float)):
            out.append(r)
    return out


def _times(records: list[dict], event: str) -> list[float]:
    return [r["time"] for r in records if r.get("event") == event]


def training_times(records: dict[str, list[dict]], workers: int, t0: float) -> dict[str, float]:
    """What the example itself recorded, as seconds since t0 (the submit's wall-clock time: the
    pods run on this host's clock), the same for both sides. From {"worker-0": records, ...}:
      first_step_s   worker 0's first step record (written once its first step ran);
      complete_s     every worker's first step record: each worker reached the PS, found the
                     model initialised and trained, so every task of TF_CONFIG works;
      done_record_s  the last worker's done record (its MonitoredSession ended);
      train_s        first step to last done: the training itself.
    A time is missing when a worker never recorded it."""
    out: dict[str, float] = {}
    firsts = [min(_times(records.get(f"worker-{i}", []), "step"), default=None) for i in range(workers)]
    if firsts and firsts[0] is not None:
        out["first_step_s"] = firsts[0] - t0
    if firsts and None not in firsts:
        out["complete_s"] = max(firsts) - t0
    dones = [max(_times(records.get(f"worker-{i}", []), "done"), default=None) for i in range(workers)]
    if dones and None not in dones:
        out["done_record_s"] = max(dones) - t0
        if "first_step_s" in out:
            out["train_s"] = out["done_record_s"] - out["first_step_s"]
    return out


def first_after(records: list[dict], event: str, t: float) -> float | None:
    """The time of the first `event` record after t (both the pod's wall clock)."""
    return min((x for x in _times(records, event) if x > t), default=None)


# ---------------------------------------------------------------- a crash in place

# `kubectl exec <pod> -c tensorflow -- *CRASH`: SIGKILL, as the OOM killer sends it, to the
# training process, the launcher's child (the launcher, PID 1, forks the script:
# tfhelm/pod/supervise.py; in tfhelm's pods and the TFJob's alike). Never PID 1: a signal a pid
# namespace's init gets from inside it without a handler is dropped. It runs as the container's
# own user, so Pod Security "restricted" allows it (tests/programs kill a worker so too). The
# launcher then exits 137 (128 + 9), the pod stays; it prints when the signal went.
CRASH = ["sh", "-c", "kill -KILL $(cat /proc/1/task/1/children) && date +%s.%N"]


# ---------------------------------------------------------------- DNS over UDP, as bytes

def dns_query(qid: int, name: str, do: bool = False, cd: bool = False) -> bytes:
    """An A query for `name`; the DO (EDNS) and CD bits make separate entries in CoreDNS's
    cache, so a poller can ask again sooner than a cached negative answer expires."""
    flags = 0x0100 | (0x0010 if cd else 0)  # RD, CD
    header = struct.pack(">HHHHHH", qid, flags, 1, 0, 0, 1 if do else 0)
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    question = qname + struct.pack(">HH", 1, 1)
    opt = b"\0" + struct.pack(">HHIH", 41, 1232, 0x8000 if do else 0, 0) if do else b""
    return header + question + opt


def dns_answer(data: bytes) -> tuple[int, bool]:
    """(query id, whether the answer is NOERROR with at least one record)."""
    qid, flags, _, ancount = struct.unpack(">HHHH", data[:8])
    return qid, (flags & 0x000F) == 0 and ancount > 0


# ---------------------------------------------------------------- requests by client

FLOW_METRIC = "apiserver_flowcontrol_dispatched_requests_total"


def requests_by_flow_schema(metrics_text: str) -> dict[str, float]:
    """Requests the API server dispatched, per FlowSchema, from its /metrics text."""
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if not line.startswith(FLOW_METRIC + "{"):
            continue
        labels, value = line[len(FLOW_METRIC) + 1:].rsplit("} ", 1)
        m = re.search(r'flow_schema="([^"]*)"', labels)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + float(value)
    return out


CLIENT_METRIC = "rest_client_requests_total"


def client_requests(metrics_text: str) -> float:
    """Requests a Go client made, all codes and methods, from its process's /metrics text."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
               if line.startswith(CLIENT_METRIC + "{") or line.startswith(CLIENT_METRIC + " "))


def delta(before: dict[str, float], after: dict[str, float], keys) -> dict[str, int]:
    return {k: round(after.get(k, 0) - before.get(k, 0)) for k in keys}


# ---------------------------------------------------------------- objects

def largest_object(items: list[dict]) -> tuple[int, str]:
    """(bytes, kind/name) of the largest object as compact JSON, as the API server stores it."""
    best = (0, "-")
    for item in items:
        size = len(json.dumps(item, separators=(",", ":")))
        if size > best[0]:
            best = (size, f"{item.get('kind', '?')}/{item['metadata']['name']}")
    return best


# ---------------------------------------------------------------- medians and tables

WHO = ("tfhelm", "tfjob")


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a, b) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}×"


def fmt_s(s) -> str:
    if s is None:
        return "-"
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s" if s < 100 else f"{s:.0f} s"


def fmt_bytes(b) -> str:
    if b is None:
        return "-"
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b} B"


def fmt_n(n) -> str:
    return "-" if n is None else f"{n:,.0f}"


def spread(values, f) -> str:
    """`median (min–max)` of the values (None left out), the unit once: "2.10 s (1.90–3.00 s)";
    the median alone when they are all equal."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return "-"
    m, lo, hi = f(median(values)), f(values[0]), f(values[-1])
    if lo == hi:
        return m
    lo_num, _, lo_unit = lo.partition(" ")
    return f"{m} ({lo_num if lo_unit and hi.endswith(' ' + lo_unit) else lo}–{hi})"


# The rows of the table: (label, key in a run, formatter). Seconds from the submit command's
# start unless the label says otherwise. "Records" are the example's own (training_times).
TIME_ROWS = [
    ("submit → all task pods Running", "running_s", fmt_s),
    ("submit → pods Running and every TF_CONFIG name resolves (DNS)", "names_s", fmt_s),
    ("submit → first training step (worker 0's first step record)", "first_step_s", fmt_s),
    ("TF cluster complete: submit → every worker's first step record", "complete_s", fmt_s),
    ("submit command returns", "returned_s", fmt_s),
    ("training: worker 0's first step → last worker's done record", "train_s", fmt_s),
    ("submit → last worker's done record", "done_record_s", fmt_s),
    ("submit → last worker pod Succeeded", "workers_done_s", fmt_s),
    ("last worker pod Succeeded → training done seen", "done_seen_after_s", fmt_s),
    ("last worker pod Succeeded → done condition (Job Complete / TFJob Succeeded)", "condition_after_s", fmt_s),
    ("training done → PS gone", "ps_gone_after_s", fmt_s),
    ("submit → PS gone (whole run)", "ps_gone_s", fmt_s),
]
# kwok pods run nothing: no records, only what the API and DNS show.
KWOK_TIME_ROWS = [row for row in TIME_ROWS if row[1] in ("running_s", "names_s", "returned_s")]
COUNT_ROWS = [
    ("Services", "services", fmt_n),
    ("objects in the namespace", "objects", fmt_n),
    ("largest object (compact JSON)", "largest_bytes", fmt_bytes),
]


def summarize(runs: list[dict], keys) -> dict[str, dict[str, float | None]]:
    """Medians per side: {who: {key: median}} over the runs of that side."""
    return {who: {k: median(r.get(k) for r in runs if r["who"] == who) for k in keys} for who in WHO}


def table(runs: list[dict], rows, clients: list[str] | None = None) -> list[str]:
    """Markdown rows `| what | tfhelm | TFJob | tfhelm / TFJob |`: each side's median (min–max)
    over its runs, and the ratio of the medians."""
    req_keys = [f"requests:{c}" for c in clients or []]
    flat = [dict(r, **{f"requests:{c}": v for c, v in (r.get("requests") or {}).items()}) for r in runs]
    lines = [(label, key, f) for label, key, f in rows]
    lines += [(f"requests: {c}", k, fmt_n) for c, k in zip(clients or [], req_keys)]
    lines.append(("requests: all counted clients", "requests_total", fmt_n))
    m = summarize(flat, [k for _, k, _ in lines])
    out = ["| | tfhelm | TFJob | tfhelm / TFJob |", "|---|---:|---:|---:|"]
    for label, key, f in lines:
        a, b = m["tfhelm"][key], m["tfjob"][key]
        if (a is None and b is None) or (key in req_keys and not (a or b)):
            continue
        cells = [spread((r.get(key) for r in flat if r["who"] == who), f) for who in WHO]
        out.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio(a, b)} |")
    return out


# The faults, each once worker 0 recorded step 100: what is done, to which task.
FAULTS = {"worker": ("worker 1 pod deleted", ("worker", 1)),
          "ps": ("PS 0 pod deleted", ("ps", 0)),
          "crash": ("worker 1's process killed, pod kept", ("worker", 1))}


def fault_rows(runs: list[dict]) -> list[str]:
    """One row per (fault, side): survived?, the task's stop, its pod's end, the task running
    and back in a session again, training done; median (min–max) of the runs."""
    out = ["| fault at worker 0's step 100 | | job survives | task stopped | its pod object gone "
           "| task running again | task in a session again | training done | workers restarted |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for fault, (label, _) in FAULTS.items():
        for who in WHO:
            rs = [r for r in runs if r["who"] == who and r.get("fault") == fault]
            if not rs:
                continue
            survived = sum(1 for r in rs if r.get("succeeded"))
            cells = [spread((r.get(k) for r in rs), fmt_s) for k in (
                "victim_stopped_s", "victim_gone_s", "replacement_running_s", "session_again_s", "done_after_fault_s")]
            out.append(f"| {label} | {'tfhelm' if who == 'tfhelm' else 'TFJob'} | {survived}/{len(rs)} | "
                       + " | ".join(cells) + f" | {spread((r.get('worker_restarts') for r in rs), fmt_n)} |")
    return out


def load_range(runs: list[dict]) -> str | None:
    """The machine's 1-minute load average at the runs' submits, `min–max`."""
    loads = sorted(r["load_at_submit"] for r in runs if r.get("load_at_submit") is not None)
    return f"{loads[0]:.1f}–{loads[-1]:.1f}" if loads else None


RESULTS_FORMAT = 2  # 2: complete_s is the first-step record time; before, the DNS one


def upgrade(res: dict) -> dict:
    """Results of an older bench (no `format`) as this one reads them: their "complete" (pods
    Running, every TF_CONFIG name resolves) is the DNS row now. Its format stays, so the report
    can say how the old runs were made."""
    if res.get("format", 1) < 2:
        for part in ("real", "faults", "kwok"):
            for r in res.get(part, []):
                if "complete_s" in r and "names_s" not in r:
                    r["names_s"] = r.pop("complete_s")
    return res


def replace_between(text: str, begin: str, end: str, body: str) -> str | None:
    """text with what lies between the markers replaced by body (None: no markers)."""
    if begin not in text or end not in text:
        return None
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}{end}{tail}"
