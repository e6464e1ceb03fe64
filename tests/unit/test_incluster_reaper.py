"""The in-cluster reaper (tfhelm/reaper/incluster.py) and its door to the API server
(tfhelm/pod/apiserver.py, standard library only), against an API server in memory served over
HTTP (tests/unit/fake_apiserver.py's objects, with list paging and watches): the same loop and
rules as `tfhelm reap` decide, this client acts within the reaper's Role. The cluster tier runs
the chart's copy against the real API server with a ServiceAccount token."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.unit.fake_apiserver import FakeApiServer
from tests.unit.test_kube_facade import REAPER_ROLE, reaper_cluster
from tfhelm.errors import Gone
from tfhelm.pod.apiserver import ApiError, ApiServer
from tfhelm.reaper import default_config, incluster
from tfhelm.reaper.loop import Reaper


class Http:
    """FakeApiServer's objects over HTTP: lists page by `limit`; a watch sends the events
    queued for it (`events`), then stays open until the client leaves."""

    def __init__(self, fake: FakeApiServer):
        self.fake, self.events, self.seen_tokens = fake, [], []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.serve(self)
            do_POST = do_PATCH = do_DELETE = do_GET

            def log_message(self, *args):
                pass
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        self.seen_tokens.append(h.headers.get("Authorization"))
        url = urlsplit(h.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        body = json.loads(h.rfile.read(int(h.headers.get("Content-Length") or 0)) or "null")
        if query.get("watch") == "true":
            h.send_response(200)
            h.end_headers()
            for event in self.events:
                h.wfile.write(json.dumps(event).encode() + b"\n")
                h.wfile.flush()
            while h.rfile.read(1):  # until the client closes
                pass
            return
        self.fake.calls.append(f"{h.command} {url.path}")
        if f"{h.command} {url.path}" in self.fake.refuse:
            status, message = self.fake.refuse[f"{h.command} {url.path}"]
            answer = {"kind": "Status", "code": status, "message": message}
        else:
            status, answer = self.fake._answer(h.command, url.path, query, body)
        if h.command == "GET" and "items" in answer and query.get("limit"):  # one item a page
            start = int(query.get("continue") or 0)
            more = start + 1 < len(answer["items"])
            answer = {**answer, "items": answer["items"][start:start + 1],
                      "metadata": {**answer["metadata"], **({"continue": str(start + 1)} if more else {})}}
        data = json.dumps(answer).encode()
        h.send_response(status)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


@pytest.fixture
def api(tmp_path):
    fake = FakeApiServer()
    reaper_cluster(fake)
    http = Http(fake)
    (tmp_path / "token").write_text("token-1\n")
    yield http, ApiServer(http.url, token_file=str(tmp_path / "token")), tmp_path
    http.server.shutdown()


def test_lists_page_by_page_with_the_tokens_the_kubelet_rotates(api):
    http, server, tmp_path = api
    items, version = server.list("/apis/apps/v1/namespaces/ns/deployments")
    assert [d["metadata"]["name"] for d in items] == ["c-ps-0", "other-ps-0"] and version == "1"
    (tmp_path / "token").write_text("token-2\n")
    server.list("/apis/apps/v1/namespaces/ns/deployments")
    assert http.seen_tokens[0] == "Bearer token-1" and http.seen_tokens[-1] == "Bearer token-2"
    with pytest.raises(ApiError) as e:
        server.request("GET", "/apis/apps/v1/namespaces/ns/deployments/nope")
    assert e.value.status == 404


def test_a_watch_streams_events_bookmarks_and_410_and_stop_ends_it(api):
    http, server, _ = api
    http.events = [{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "5"}}},
                   {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}},
                   {"type": "ERROR", "object": {"code": 410, "message": "too old"}}]
    got = []
    with pytest.raises(Gone):
        for event in server.watch("/apis/batch/v1/namespaces/ns/jobs", "4", 30):
            got.append((event[0], event[2]))
    assert got == [("ADDED", "5"), ("BOOKMARK", "7")]
    http.events = []
    done = threading.Event()
    watcher = threading.Thread(target=lambda: (list(server.watch("/x", "1", 30)), done.set()), daemon=True)
    watcher.start()
    while not server._open:
        done.wait(0.01)
    server.stop()
    assert done.wait(10), "stop() ends a watch blocked in its read"


def test_the_in_cluster_client_reaps_within_the_reapers_role(api):
    """The loop and rules of `tfhelm reap`, this client: the PS of cluster c deleted (not
    other's), the in-graph worker Job suspended, the Events written, nothing but the Role's
    requests asked."""
    http, server, _ = api
    http.fake.objects["/apis/batch/v1/namespaces/ns/jobs/c-chief"] = {"metadata": {
        "name": "c-chief", "uid": "uid-chief", "labels": {"tfhelm.io/cluster": "c", "tfhelm.io/role": "chief"},
        "creationTimestamp": "2026-01-01T12:00:00Z", "annotations": {"tfhelm.io/runs": "script"}},
        "spec": {"completions": 1}, "status": {"succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T12:00:00Z"}]}}
    http.fake.objects["/apis/batch/v1/namespaces/ns/jobs/c-worker"]["status"] = {"active": 2}  # serving
    client = incluster.ApiReapClient(server)
    lines: list[str] = []
    reaper = Reaper(client, "ns", "c", default_config(grace=0, delete_directly=True), forever=True,
                    log_line=lines.append, backoff=(0.01, 0.05))
    runner = threading.Thread(target=reaper.run, daemon=True)
    runner.start()
    done = threading.Event()
    while not any("reaped" in line for line in lines) and not done.wait(0.02):
        assert runner.is_alive(), lines
    reaper.stop()
    runner.join(10)
    objects = http.fake.objects
    assert "/apis/apps/v1/namespaces/ns/deployments/c-ps-0" not in objects
    assert "/api/v1/namespaces/ns/services/c-ps-0" not in objects
    assert "/apis/apps/v1/namespaces/ns/deployments/other-ps-0" in objects
    assert objects["/apis/batch/v1/namespaces/ns/jobs/c-worker"]["spec"]["suspend"] is True
    events = {o["reason"]: o for p, o in objects.items() if "/events/" in p}
    assert set(events) == {"TFClusterReaping", "TFClusterReaped"}
    assert events["TFClusterReaped"]["involvedObject"]["name"] == "c-chief"
    asked = {(c.split()[0], c.split()[1].split("/")[-2 if c.split()[0] in ("DELETE", "PATCH") else -1])
             for c in http.fake.calls}
    assert asked <= REAPER_ROLE, asked - REAPER_ROLE


def test_a_refusal_stops_the_in_cluster_reaper_with_one_line_and_exit_3(api, capsys):
    http, server, tmp_path = api
    http.fake.refuse["GET /apis/batch/v1/namespaces/ns/jobs"] = (
        403, 'jobs.batch is forbidden: User "system:serviceaccount:ns:c-reaper" cannot list resource "jobs"')
    code = incluster.main(["c", "--namespace=ns", "--grace=0", "--completion=auto", "--on-failure=keep",
                           f"--server={http.url}", f"--service-account={tmp_path}"])
    assert code == 3
    err = capsys.readouterr().err
    assert "error: the API server refused the reaper: GET /apis/batch/v1/namespaces/ns/jobs: 403" in err, err


def test_the_queue_gate_and_a_namespace_being_deleted_through_the_in_cluster_client(api):
    """A gate opened with a strategic merge patch of the pod (the gate deleted by name); a
    namespace being deleted told from the refusal of the reaper's stopping Event."""
    http, server, _ = api
    http.fake.objects["/api/v1/namespaces/ns/pods/c-ps-0-x"] = {
        "metadata": {"name": "c-ps-0-x"}, "spec": {"schedulingGates": [{"name": "tfhelm.io/queue"}]}}
    client = incluster.ApiReapClient(server)
    client.open_gate("ns", "c-ps-0-x")
    assert "PATCH /api/v1/namespaces/ns/pods/c-ps-0-x" in http.fake.calls
    assert client.namespace_ending("ns") is False  # the Event was written
    http.fake.refuse["POST /api/v1/namespaces/ns/events"] = (
        403, 'events "x" is forbidden: unable to create new content in namespace ns because it is being terminated')
    assert client.namespace_ending("ns") is True
    http.fake.refuse["POST /api/v1/namespaces/ns/events"] = (403, 'events is forbidden: User "x" cannot create')
    assert client.namespace_ending("ns") is False
