"""The peer bench's pure parts (bench/peerlib.py): the TFJob it builds from tfhelm's render has
the same image, script, volumes, security and resources, without what TFJob sets itself or what
only tfhelm's chart writes; pods of both kinds map to their tasks; the example's records give
the training times; the DNS bytes, the request counts and
the tables are right."""

from __future__ import annotations

import copy
import json
import struct
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import peerlib  # noqa: E402


def labels(component: str, **more) -> dict:
    return {"app.kubernetes.io/name": "tf-cluster", "app.kubernetes.io/instance": "peer",
            "app.kubernetes.io/component": component, "tfhelm.io/cluster": "peer", **more}


def pod_template(role: str) -> dict:
    ports = [{"name": "tf", "containerPort": 2222}, {"name": "metrics", "containerPort": 9090}]
    index = ({"name": "TFHELM_TASK_INDEX", "value": "0"} if role == "ps" else
             {"name": "TFHELM_TASK_INDEX", "valueFrom": {"fieldRef": {
                 "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}})
    container = {
        "name": "tensorflow", "image": "tensorflow/tensorflow:2.21.0",
        "command": ["python3", "/etc/tfhelm/launcher.py"], "args": ["server"] if role == "ps" else ["script", "/code/x.py"],
        "ports": ports,
        "env": [index, {"name": "TFHELM_TASK_TYPE", "value": role}, {"name": "TFHELM_CLUSTER", "value": "peer"},
                {"name": "TFHELM_CLUSTER_SPEC_FILE", "value": "/etc/tfhelm/cluster-spec.json"},
                {"name": "TFHELM_LOG_DIR", "value": "/log/peer"}, {"name": "HOME", "value": "/tmp"},
                {"name": "TFHELM_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                {"name": "TF_GRPC_DEFAULT_OPTIONS", "value": "grpc.keepalive_time_ms=10000"}]
               + ([{"name": "TFHELM_STOP_DELAY", "value": "10"}] if role == "ps" else []),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "100m"}},
        "volumeMounts": [{"name": "tfhelm-config", "mountPath": "/etc/tfhelm"}, {"name": "logs", "mountPath": "/log"}],
    }
    if role == "ps":
        container["readinessProbe"] = {"tcpSocket": {"port": "tf"}}
    spec = {"containers": [container], "securityContext": {"runAsNonRoot": True},
            "automountServiceAccountToken": False, "enableServiceLinks": False, "terminationGracePeriodSeconds": 30,
            "dnsConfig": {"options": [{"name": "ndots", "value": "1"}]},
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 10}],
            "volumes": [{"name": "tfhelm-config", "configMap": {"name": f"peer{'-ps' if role == 'ps' else ''}-tfconfig"}},
                        {"name": "logs", "persistentVolumeClaim": {"claimName": "peer-logs"}}]}
    if role != "ps":
        spec.update(restartPolicy="Never", subdomain="peer-worker")
    return {"metadata": {"labels": labels(role, **({"tfhelm.io/task-index": "0"} if role == "ps" else {})),
                         "annotations": {"checksum/cluster-spec": "abc", "team": "a"}},
            "spec": spec}


def render() -> list[dict]:
    def obj(kind, name, component, **body):
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "labels": labels(component)}, **body}
    return [
        obj("ConfigMap", "peer-ps-tfconfig", "config", data={"launcher.py": "..."}),
        obj("Service", "peer-ps-0", "ps", spec={}),
        obj("Deployment", "peer-ps-0", "ps", spec={"template": pod_template("ps")}),
        obj("ConfigMap", "peer-code", "code", data={"x.py": "print(1)"}),
        obj("ConfigMap", "peer-tfconfig", "config", data={"cluster-spec.json": "{}"}),
        obj("PersistentVolumeClaim", "peer-logs", "storage", spec={}),
        obj("ServiceAccount", "peer-reaper", "reaper"),
        obj("Service", "peer-worker", "worker", spec={"clusterIP": "None"}),
        obj("Job", "peer-worker-1a2b3c", "worker", spec={"template": pod_template("worker")}),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "peer-test", "labels": labels("test"),
                                                        "annotations": {"helm.sh/hook": "test"}}},
    ]


def test_the_tfjob_is_what_its_user_writes_for_the_same_image_script_and_volumes():
    docs = render()
    before = copy.deepcopy(docs)
    out = peerlib.tfjob_manifests(docs, "peer", "team-a", workers=4, ps=2)
    assert docs == before  # the render is left as it was
    assert [(d["kind"], d["metadata"]["name"]) for d in out] == [
        ("ConfigMap", "peer-ps-tfconfig"), ("ConfigMap", "peer-code"), ("ConfigMap", "peer-tfconfig"),
        ("PersistentVolumeClaim", "peer-logs"), ("TFJob", "peer")]  # no Services, Jobs, hooks, reaper
    assert all(d["metadata"]["namespace"] == "team-a" for d in out)
    tfjob = out[-1]
    assert tfjob["apiVersion"] == "kubeflow.org/v1"
    assert tfjob["spec"]["successPolicy"] == "AllWorkers"
    assert tfjob["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 12}
    specs = tfjob["spec"]["tfReplicaSpecs"]
    assert {k: (v["replicas"], v["restartPolicy"]) for k, v in specs.items()} == {
        "Worker": (4, "OnFailure"), "PS": (2, "Always")}
    for role, key in (("worker", "Worker"), ("ps", "PS")):
        source, t = pod_template(role), specs[key]["template"]
        assert t["spec"]["volumes"] == source["spec"]["volumes"]
        assert t["spec"]["securityContext"] == source["spec"]["securityContext"]
        # TFJob's own, then the chart's tuning (a Ready-only Service waits for a readiness probe)
        assert set(t["spec"]) == {"containers", "volumes", "securityContext", "automountServiceAccountToken"}
        c, s = t["spec"]["containers"][0], source["spec"]["containers"][0]
        for field in ("image", "command", "args", "resources", "securityContext", "volumeMounts"):
            assert c[field] == s[field], field
        assert "readinessProbe" not in c and "terminationMessagePolicy" not in c
        assert [e["name"] for e in c["env"]] == ["TFHELM_LOG_DIR", "HOME"]  # the script's own
        assert c["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
        assert t["metadata"] == {"annotations": {"team": "a"}}  # no tfhelm labels, no checksum


def test_without_ps_the_tfjob_has_only_workers():
    docs = [d for d in render() if d["kind"] != "Deployment"]
    assert list(peerlib.tfjob_manifests(docs, "peer", "x", 3, 0)[-1]["spec"]["tfReplicaSpecs"]) == ["Worker"]


def test_pods_of_both_kinds_map_to_their_tasks():
    tfhelm_worker = {"metadata": {"labels": labels("worker"),
                                  "annotations": {"batch.kubernetes.io/job-completion-index": "3"}}}
    tfhelm_ps = {"metadata": {"labels": labels("ps", **{"tfhelm.io/task-index": "1"})}}
    tfjob_ps = {"metadata": {"labels": {"training.kubeflow.org/replica-type": "ps",
                                        "training.kubeflow.org/replica-index": "0"}}}
    tfjob_worker = {"metadata": {"labels": {"training.kubeflow.org/replica-type": "Worker",
                                            "training.kubeflow.org/replica-index": "7"}}}
    reaper = {"metadata": {"labels": labels("reaper")}}
    assert [peerlib.task_of(p) for p in (tfhelm_worker, tfhelm_ps, tfjob_ps, tfjob_worker, reaper)] == [
        ("worker", 3), ("ps", 1), ("ps", 0), ("worker", 7), None]


def test_dns_names_as_a_pods_resolver_reaches_them():
    tfjob = {"cluster": {"worker": ["peer-worker-0.ns.svc:2222", "peer-worker-1.ns.svc:2222"],
                         "ps": ["peer-ps-0.ns.svc:2222"]}, "task": {"type": "worker", "index": 0}}
    assert peerlib.dns_names(tfjob) == ["peer-ps-0.ns.svc.cluster.local", "peer-worker-0.ns.svc.cluster.local",
                                        "peer-worker-1.ns.svc.cluster.local"]
    tfhelm = {"cluster": {"worker": ["peer-worker-0.peer-worker.ns.svc.cluster.local:2222"]}}
    assert peerlib.dns_names(tfhelm) == ["peer-worker-0.peer-worker.ns.svc.cluster.local"]
    pod = {"spec": {"containers": [{"name": "tensorflow", "env": [{"name": "TF_CONFIG", "value": '{"cluster": {}}'}]}]}}
    assert peerlib.pod_tf_config(pod) == {"cluster": {}} and peerlib.pod_tf_config({"spec": {}}) is None


def test_dns_query_bytes_and_answers():
    q = peerlib.dns_query(0x1234, "a.b.svc.cluster.local")
    qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", q[:12])
    assert (qid, flags & 0x0100, flags & 0x0010, qd, an, ns, ar) == (0x1234, 0x0100, 0, 1, 0, 0, 0)
    assert q[12:] == b"\x01a\x01b\x03svc\x07cluster\x05local\x00" + struct.pack(">HH", 1, 1)
    edns = peerlib.dns_query(1, "a", do=True, cd=True)
    assert struct.unpack(">H", edns[2:4])[0] & 0x0010 and struct.unpack(">H", edns[10:12])[0] == 1
    assert edns.endswith(b"\x00" + struct.pack(">HHIH", 41, 1232, 0x8000, 0))
    answer = struct.pack(">HHHHHH", 7, 0x8180, 1, 1, 0, 0)
    nxdomain = struct.pack(">HHHHHH", 8, 0x8183, 1, 0, 0, 0)
    nodata = struct.pack(">HHHHHH", 9, 0x8180, 1, 0, 0, 0)
    assert [peerlib.dns_answer(a) for a in (answer, nxdomain, nodata)] == [(7, True), (8, False), (9, False)]


def test_requests_per_flow_schema_from_the_metrics_text():
    text = "\n".join([
        "# HELP apiserver_flowcontrol_dispatched_requests_total ...",
        'apiserver_flowcontrol_dispatched_requests_total{flow_schema="bench-peer-user",priority_level="exempt"} 12',
        'apiserver_flowcontrol_dispatched_requests_total{flow_schema="bench-peer-user",priority_level="other"} 3',
        'apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 1e+03',
        'apiserver_flowcontrol_current_executing_requests{flow_schema="bench-peer-user",priority_level="exempt"} 1',
    ])
    counts = peerlib.requests_by_flow_schema(text)
    assert counts == {"bench-peer-user": 15, "exempt": 1000}
    assert peerlib.delta({"bench-peer-user": 5}, counts, ["bench-peer-user", "bench-peer-operator"]) == {
        "bench-peer-user": 10, "bench-peer-operator": 0}


def test_a_go_clients_own_request_count():
    text = "\n".join([
        "# TYPE rest_client_requests_total counter",
        'rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 40',
        'rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 2',
        'rest_client_request_duration_seconds_count{host="127.0.0.1:6443",verb="GET"} 999',
    ])
    assert peerlib.client_requests(text) == 42


def test_largest_object_is_the_longest_compact_json():
    small = {"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}
    big = {"kind": "Secret", "metadata": {"name": "sh.helm.release.v1.peer.v1"}, "data": {"release": "x" * 100}}
    size, which = peerlib.largest_object([small, big])
    assert which == "Secret/sh.helm.release.v1.peer.v1" and size == len(
        '{"kind":"Secret","metadata":{"name":"sh.helm.release.v1.peer.v1"},"data":{"release":"' + "x" * 100 + '"}}')


def run_(who, running, services, requests, **more):
    return {"who": who, "running_s": running, "services": services, "requests": requests,
            "requests_total": sum(requests.values()), **more}


def test_the_table_has_medians_per_side_and_their_ratio():
    runs = [run_("tfhelm", 10.0, 3, {"user": 40, "operator": 0}), run_("tfjob", 20.0, 5, {"user": 2, "operator": 100}),
            run_("tfhelm", 30.0, 3, {"user": 60, "operator": 0}), run_("tfjob", 40.0, 5, {"user": 4, "operator": 300}),
            run_("tfhelm", 12.0, 3, {"user": 50, "operator": 0}), run_("tfjob", None, 5, {"user": 3, "operator": 200})]
    rows = peerlib.table(runs, peerlib.TIME_ROWS + peerlib.COUNT_ROWS, ["user", "operator"])
    assert rows[:2] == ["| | tfhelm | TFJob | tfhelm / TFJob |", "|---|---:|---:|---:|"]
    # median (min–max), None left out
    assert "| submit → all task pods Running | 12.0 s (10.0–30.0 s) | 30.0 s (20.0–40.0 s) | 0.40× |" in rows
    assert "| Services | 3 | 5 | 0.60× |" in rows  # all equal: one number
    assert "| requests: user | 50 (40–60) | 3 (2–4) | 16.67× |" in rows
    assert "| requests: operator | 0 | 200 (100–300) | 0.00× |" in rows
    assert "| requests: all counted clients | 50 (40–60) | 203 (102–304) | 0.25× |" in rows
    assert not any("PS gone" in r for r in rows)  # no side measured it: no row


def test_fault_rows_say_whether_the_job_survived():
    runs = [{"who": "tfhelm", "fault": "ps", "succeeded": True, "victim_stopped_s": 1.0, "victim_gone_s": 1.5,
             "replacement_running_s": 4.0, "session_again_s": 9.0, "done_after_fault_s": 60.0, "worker_restarts": 4},
            {"who": "tfjob", "fault": "ps", "succeeded": False, "victim_gone_s": 2.0},
            {"who": "tfjob", "fault": "crash", "succeeded": True, "victim_stopped_s": 0.5, "replacement_running_s": 1.0,
             "session_again_s": 8.0, "done_after_fault_s": 40.0, "worker_restarts": 1},
            {"who": "tfjob", "fault": "crash", "succeeded": False, "victim_stopped_s": 0.7, "worker_restarts": 1}]
    rows = peerlib.fault_rows(runs)
    assert len(rows) == 5 and rows[0].count("|") == rows[1].count("|") == rows[2].count("|")
    assert rows[2] == "| PS 0 pod deleted | tfhelm | 1/1 | 1.00 s | 1.50 s | 4.00 s | 9.00 s | 60.0 s | 4 |"
    assert rows[3] == "| PS 0 pod deleted | TFJob | 0/1 | - | 2.00 s | - | - | - | - |"
    assert rows[4] == ("| worker 1's process killed, pod kept | TFJob | 1/2 | 0.60 s (0.50–0.70 s) | - | 1.00 s "
                       "| 8.00 s | 40.0 s | 1 |")


def test_spread_gives_the_unit_once_and_the_load_its_range():
    assert peerlib.spread([3.0, 1.9, None, 2.1], peerlib.fmt_s) == "2.10 s (1.90–3.00 s)"
    assert peerlib.spread([900, 2048], peerlib.fmt_bytes) == "1.44 KiB (900 B–2 KiB)"
    assert peerlib.spread([None], peerlib.fmt_s) == "-"
    assert peerlib.load_range([{"load_at_submit": 2.26}, {"load_at_submit": 0.5}, {}]) == "0.5–2.3"
    assert peerlib.load_range([{}]) is None


def test_older_results_keep_their_dns_complete_as_the_dns_row():
    old = {"real": [{"complete_s": 13.1}], "faults": [{"complete_s": 4.0, "names_s": 3.0}]}
    assert peerlib.upgrade(old) == {"real": [{"names_s": 13.1}], "faults": [{"complete_s": 4.0, "names_s": 3.0}]}
    new = {"format": peerlib.RESULTS_FORMAT, "real": [{"complete_s": 20.0}]}
    assert peerlib.upgrade(new)["real"] == [{"complete_s": 20.0}]


def rec(event, t, **more):
    return {"event": event, "task": "w", "pod": "p", "time": t, **more}


def test_training_times_come_from_the_examples_own_records():
    text = "\n".join(json.dumps(r) for r in (rec("start", 105.0, step=0), rec("step", 106.0, step=1))) + '\n{"event": "st'
    w0 = peerlib.parse_records(text + "\n" + json.dumps(rec("done", 130.0)))  # a half-written line is left out
    assert [r["event"] for r in w0] == ["start", "step", "done"]
    w1 = [rec("start", 107.0), rec("step", 108.5), rec("start", 120.0), rec("step", 121.0), rec("done", 133.0)]
    times = peerlib.training_times({"worker-0": w0, "worker-1": w1}, 2, t0=100.0)
    assert times == {"first_step_s": 6.0, "complete_s": 8.5, "done_record_s": 33.0, "train_s": 27.0}
    # a worker that never stepped: no complete, no training time
    assert peerlib.training_times({"worker-0": w0}, 2, t0=100.0) == {"first_step_s": 6.0}
    assert peerlib.first_after(w1, "start", 110.0) == 120.0 and peerlib.first_after(w1, "start", 121.0) is None
