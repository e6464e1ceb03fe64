# tfhelm/reaper/incluster.py without its prose (make chart-files)
from __future__ import annotations
import argparse
import os
import signal
import socket
import sys
import time
from datetime import datetime, timezone
from tfhelm.contract import QUEUE_GATE, contract
from tfhelm.errors import NO_CLUSTER, TfhelmError
from tfhelm.jsonobject import JsonObject
from tfhelm.pod.apiserver import (JSON_PATCH, MERGE_PATCH, METADATA_LIST, METADATA_WATCH, SERVICE_ACCOUNT,
                                  STRATEGIC_PATCH, SUCCEEDED, ApiError, ApiServer)
from tfhelm.pod.logs import json_line
from tfhelm.reaper import rules
from tfhelm.reaper.gates import GateRule
from tfhelm.reaper.lost import LostTasks, release_in_ending_namespace
from tfhelm.reaper.loop import Reaper
from tfhelm.reaper.metrics import ReaperMetrics, serve
TIMEOUT = 30
ENDING_BOUND = 600
BACKGROUND = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
def _path(namespace: str, resource: str, name: str = "") -> str:
    group = "/apis/batch/v1" if resource == "jobs" else "/apis/apps/v1" if resource == "deployments" else "/api/v1"
    return f"{group}/namespaces/{namespace}/{resource}" + (f"/{name}" if name else "")
class Refused(TfhelmError):
    exit_code = NO_CLUSTER
class ApiReapClient:
    def __init__(self, api: ApiServer):
        self.api = api
        self.instance = os.environ.get("HOSTNAME") or socket.gethostname()
    def list_jobs(self, namespace, selector):
        jobs, version = self.api.list(_path(namespace, "jobs"), labelSelector=selector)
        return [JsonObject(j) for j in jobs], version
    def watch_jobs(self, namespace, selector, resource_version, timeout):
        for kind, job, version in self.api.watch(_path(namespace, "jobs"), resource_version, timeout,
                                                 labelSelector=selector):
            yield kind, None if job is None else JsonObject(job), version
    def list_pods(self, namespace, selector):
        return self.api.list(_path(namespace, "pods"), accept=METADATA_LIST, labelSelector=selector,
                             fieldSelector=SUCCEEDED)
    def watch_pods(self, namespace, selector, resource_version, timeout):
        return self.api.watch(_path(namespace, "pods"), resource_version, timeout, accept=METADATA_WATCH,
                              labelSelector=selector, fieldSelector=SUCCEEDED)
    def stop_watch(self):
        self.api.stop()
    def uninstall_ps(self, namespace, cluster):
        raise TfhelmError("the in-cluster reaper never runs Helm (it deletes the PS directly)")
    def delete_ps(self, namespace, cluster):
        deleted = []
        for kind, resource in (("Deployment", "deployments"), ("Service", "services")):
            found, _ = self.api.list(_path(namespace, resource), labelSelector=rules.ps_selector(cluster))
            for obj in found:
                name = obj["metadata"]["name"]
                if self._absent_ok(lambda: self.api.request(
                        "DELETE", _path(namespace, resource, name), BACKGROUND,
                        timeout=TIMEOUT), 404):
                    deleted.append(f"{kind} {name}")
        return deleted
    def suspend_job(self, namespace, name):
        return self._absent_ok(lambda: self.api.request(
            "PATCH", _path(namespace, "jobs", name), {"spec": {"suspend": True}}, content_type=MERGE_PATCH,
            timeout=TIMEOUT), 404)
    def list_gated_pods(self, namespace, selector):
        return self.api.list(_path(namespace, "pods"), labelSelector=selector)
    def watch_gated_pods(self, namespace, selector, resource_version, timeout):
        return self.api.watch(_path(namespace, "pods"), resource_version, timeout, labelSelector=selector)
    def open_gate(self, namespace, pod):
        patch = {"spec": {"schedulingGates": [{"$patch": "delete", "name": QUEUE_GATE}]}}
        return self._absent_ok(lambda: self.api.request("PATCH", _path(namespace, "pods", pod), patch,
                                                        content_type=STRATEGIC_PATCH, timeout=TIMEOUT), 404)
    def evict(self, namespace, pod):
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
        return self._absent_ok(lambda: self.api.request("POST", _path(namespace, "pods", pod) + "/eviction",
                                                        eviction, timeout=TIMEOUT), 404)
    def delete_job(self, namespace, name):
        return self._absent_ok(lambda: self.api.request("DELETE", _path(namespace, "jobs", name), BACKGROUND,
                                                        timeout=TIMEOUT), 404)
    def emit(self, namespace, job, reason, message, warning):
        event = rules.event(namespace, job, reason, message, warning, self.instance, datetime.now(timezone.utc))
        return self._absent_ok(lambda: self.api.request("POST", _path(namespace, "events"), event,
                                                        timeout=TIMEOUT), 409)
    def list_live_pods(self, namespace, selector, fields):
        return self.api.list(_path(namespace, "pods"), labelSelector=selector, fieldSelector=fields)
    def watch_live_pods(self, namespace, selector, fields, resource_version, timeout):
        return self.api.watch(_path(namespace, "pods"), resource_version, timeout, labelSelector=selector,
                              fieldSelector=fields)
    def remove_finalizer(self, namespace, name, uid, index, finalizer):
        patch = [{"op": "test", "path": "/metadata/uid", "value": uid},
                 {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
                 {"op": "remove", "path": f"/metadata/finalizers/{index}"}]
        return self._absent_ok(lambda: self.api.request(
            "PATCH", _path(namespace, "pods", name), patch, content_type=JSON_PATCH, timeout=TIMEOUT), 404)
    def delete_pod_now(self, namespace, name, uid):
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": uid}}
        try:
            return self._absent_ok(lambda: self.api.request(
                "DELETE", _path(namespace, "pods", name), body, timeout=TIMEOUT), 404)
        except ApiError as e:
            if e.status == 409:
                return False
            raise
    def namespace_ending(self, namespace: str) -> bool:
        event = rules.stopping_event(namespace, self.instance, datetime.now(timezone.utc))
        try:
            self.api.request("POST", _path(namespace, "events"), event, timeout=TIMEOUT)
        except ApiError as e:
            return e.status == 403 and "being terminated" in str(e)
        return False
    def refused(self, error):
        if isinstance(error, ApiError) and error.status in (401, 403):
            return Refused(f"the API server refused the reaper: {error}; see its Role (kubectl describe "
                           "role <cluster>-reaper)")
        return None
    @staticmethod
    def _absent_ok(request, status: int) -> bool:
        try:
            request()
            return True
        except ApiError as e:
            if e.status == status:
                return False
            raise
def arguments(argv: list[str]) -> argparse.Namespace:
    reaper = contract()["reaper"]
    p = argparse.ArgumentParser(prog="reaper.py", description="The in-cluster reaper of one TF cluster.")
    p.add_argument("cluster")
    p.add_argument("--namespace", required=True)
    p.add_argument("--grace", type=float, required=True)
    p.add_argument("--completion", choices=reaper["completions"], required=True)
    p.add_argument("--on-failure", choices=reaper["onFailure"], required=True)
    p.add_argument("--metrics-port", type=int, default=0)
    p.add_argument("--log-format", choices=("plain", "json"), default="plain")
    p.add_argument("--gates", action="store_true", help="open and close the queue's scheduling gates")
    p.add_argument("--no-reap", dest="reap", action="store_false")
    p.add_argument("--replace-lost-tasks", action="store_true",
                   help="start again elsewhere the tasks of a node that no longer answers (tfhelm.reaper.lost)")
    p.add_argument("--server", default=None)
    p.add_argument("--service-account", default=SERVICE_ACCOUNT)
    return p.parse_args(argv)
def main(argv: list[str] | None = None) -> int:
    a = arguments(sys.argv[1:] if argv is None else argv)
    config = rules.ReapConfig(a.grace, a.completion, a.on_failure, delete_directly=True).validate()
    api = ApiServer(a.server, f"{a.service_account}/token", f"{a.service_account}/ca.crt")
    def record(r: dict) -> None:
        print(json_line(r.pop("level"), "tfhelm-reaper", r.pop("msg"), **r), file=sys.stderr, flush=True)
    def line(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)
    def say(text: str) -> None:
        if a.log_format == "json":
            level = next((w for w in ("warning", "error") if text.startswith(f"{w}: ")), "info")
            record({"level": level, "namespace": a.namespace, "msg": text.removeprefix(f"{level}: ")})
        else:
            line(text)
    metrics = ReaperMetrics() if a.metrics_port else None
    if metrics:
        serve(metrics, a.metrics_port, say)
    further = ([GateRule.of(a.cluster, a.completion)] if a.gates else []) + (
        [LostTasks(a.cluster, a.namespace)] if a.replace_lost_tasks else [])
    client = ApiReapClient(api)
    reaper = Reaper(client, a.namespace, a.cluster, config, forever=True, metrics=metrics,
                    reap=a.reap, rules=further,
                    **({"log_record": record} if a.log_format == "json" else {"log_line": line}))
    stopped: list[int] = []
    def stop(signum, _frame) -> None:
        stopped.append(signum)
        reaper.stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    say(f"watching {a.namespace}/{a.cluster} ("
        + (f"grace {a.grace:g}s, completion {a.completion}, on failure {a.on_failure}" if a.reap
           else "no parameter servers to reap")
        + ("; the queue's gates" if a.gates else "")
        + ("; replacing the tasks of lost nodes" if a.replace_lost_tasks else "") + ")")
    try:
        reaper.run()
        if signal.SIGTERM in stopped and a.replace_lost_tasks and client.namespace_ending(a.namespace):
            say(f"namespace {a.namespace} is being deleted: releasing the cluster's finished pods")
            released = release_in_ending_namespace(client, a.namespace, a.cluster, client.instance,
                                                   time.monotonic() + ENDING_BOUND, time.monotonic, time.sleep)
            say(f"released {len(released)} pod(s) from their Job's finalizer: {', '.join(released) or '-'}")
    except TfhelmError as e:
        say(f"error: {e}")
        return e.exit_code
    return 0
