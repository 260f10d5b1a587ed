"""RealKubeApi's wire format against a local HTTP stub: paths, verbs, content types, query, error mapping."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER, POD, ApiError
from miniclusters.backends.kubernetes.client import RealKubeApi

Seen = list[dict[str, Any]]


@pytest.fixture
def server() -> Iterator[tuple[str, Seen]]:
    seen: Seen = []

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            seen.append(
                {"method": self.command, "path": self.path, "type": self.headers.get("Content-Type"), "body": body}
            )
            if "missing" in self.path:
                status, reply = (
                    404,
                    {"kind": "Status", "reason": "NotFound", "message": 'jobs.batch "missing" not found'},
                )
            elif "watch=true" in self.path:
                lines = [{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "7"}}}]
                data = "".join(json.dumps(line) + "\n" for line in lines).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            elif "/resize" in self.path:
                status = 200
                reply = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
            elif self.path == "/apis/miniclusters.dev/v1alpha1":
                status, reply = 200, {"resources": [{"name": "miniclusters"}, {"name": "miniclusters/scale"}]}
            else:
                status, reply = 200, {"kind": "Job", "metadata": {"name": "x"}, "items": []}
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_PUT = do_POST = do_DELETE = _serve

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()


def _api(host: str) -> RealKubeApi:
    from kubernetes import client

    configuration = client.Configuration(host=host)
    return RealKubeApi(client.ApiClient(configuration), "hpc")


def test_apply_is_a_server_side_apply_patch(server) -> None:
    host, seen = server
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x", "namespace": "hpc"}, "spec": {}}
    _api(host).apply(job, field_manager="miniclusters", force=True)
    (request,) = seen
    assert request["method"] == "PATCH" and request["type"] == "application/apply-patch+yaml"
    assert request["path"] == "/apis/batch/v1/namespaces/hpc/jobs/x?fieldManager=miniclusters&force=true"
    assert json.loads(request["body"])["kind"] == "Job"


def test_merge_patch_status_and_404(server) -> None:
    host, seen = server
    api = _api(host)
    api.patch(MINICLUSTER, "hpc", "demo", {"spec": {"size": 3}})
    assert seen[-1]["path"] == "/apis/miniclusters.dev/v1alpha1/namespaces/hpc/miniclusters/demo"
    assert seen[-1]["type"] == "application/merge-patch+json"
    with pytest.raises(ApiError) as error:
        api.get(JOB, "hpc", "missing")
    assert error.value.status == 404 and error.value.reason == "NotFound" and "missing" in error.value.message


def test_resize_uses_the_pod_resize_subresource(server) -> None:
    host, seen = server
    body = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}
    pod = _api(host).patch(POD, "hpc", "p", body, "strategic", subresource="resize", field_manager="miniclusters")
    assert pod["metadata"]["name"] == "p"
    assert seen[-1]["path"].startswith("/api/v1/namespaces/hpc/pods/p/resize")
    assert seen[-1]["type"] == "application/strategic-merge-patch+json"


def test_watch_and_discovery(server) -> None:
    host, _ = server
    api = _api(host)
    (event,) = list(api.watch(JOB, "hpc", "5", timeout_seconds=1))
    assert event.type == "ADDED" and event.object["metadata"]["resourceVersion"] == "7"
    assert "miniclusters" in api.served_resources("miniclusters.dev/v1alpha1")
