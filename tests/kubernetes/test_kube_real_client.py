"""RealKubeApi's wire format against a local HTTP stub: paths, verbs, content types, query, error mapping."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER, POD, ApiError
from miniclusters.backends.kubernetes.client import RealKubeApi
from miniclusters.kube_shapes import KubeObject
from tests.waiting import wait_until

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
            reply: dict[str, Any]  # open: whatever this fake API server answers
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
    job: KubeObject = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "x", "namespace": "hpc"},
        "spec": {},
    }
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


def test_an_object_without_a_namespace_goes_to_the_clients_default(server) -> None:
    """As kubectl does, and the fake: the real server answers 405 to a create on the all-namespaces path."""
    host, seen = server
    api = _api(host)
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    api.get(JOB, None, "x")
    api.delete(JOB, None, "x")
    assert [r["path"] for r in seen] == [
        "/api/v1/namespaces/hpc/configmaps",
        "/apis/batch/v1/namespaces/hpc/jobs/x",
        "/apis/batch/v1/namespaces/hpc/jobs/x",
    ]
    api.list_objects(JOB, None)
    assert seen[-1]["path"] == "/apis/batch/v1/jobs", "a list without a namespace is of all namespaces"


def test_an_exec_the_server_refuses_is_its_status_not_a_lost_connection() -> None:
    from kubernetes.client.exceptions import ApiException

    from miniclusters.backends.kubernetes.client import _exec_error

    body = '{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pod big does not have a host assigned",'
    body += '"reason":"BadRequest","code":400}'
    refused = ApiException(status=0, reason=f"Handshake status 400 Bad Request -+-+- {{'a': 'b'}} -+-+- {body}\n")
    error = _exec_error(refused)
    assert (error.status, error.reason, error.message) == (400, "BadRequest", "pod big does not have a host assigned")
    assert not error.transient
    starting = _exec_error(
        ApiException(
            status=0, reason='Handshake status 500 Internal Server Error -+-+- {} -+-+- container not found ("main")'
        )
    )
    assert starting.status == 500 and starting.transient and "container not found" in starting.message


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


class _HostStream:
    """The exec websocket as the API server gives it without a tty, the pod being this machine: the command runs;
    closing the stream leaves it running (as the kubelet does). `interrupt` makes the wait raise as Ctrl-C does."""

    def __init__(self, command: list[str], interrupt: Path | None = None) -> None:
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.interrupt = interrupt
        self.closed = False

    def run_forever(self, timeout: float) -> None:
        if self.interrupt is not None:  # once the command has started what it starts
            wait_until(f"the command makes {self.interrupt}", self.interrupt.exists, timeout=30)
            raise KeyboardInterrupt
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)

    def is_open(self) -> bool:
        return not self.closed and self.proc.poll() is None

    def read_stdout(self) -> str:
        return "" if self.proc.poll() is None else self.proc.communicate()[0]

    def read_stderr(self) -> str:
        return ""

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def close(self) -> None:
        self.closed = True


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["timeout", "interrupt"])
def test_an_exec_given_up_on_ends_in_the_pod(how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Past its timeout, or interrupted (SIGTERM to `minicluster exec`), the stream is closed and the command and
    all it started, even what ignores SIGTERM or left its session, are ended in the pod (issue 41)."""
    import kubernetes.stream

    streams: list[_HostStream] = []

    def fake_stream(_fn: Any, _pod: str, _ns: str, command: list[str], **_kw: Any) -> _HostStream:
        streams.append(_HostStream(command, pids if how == "interrupt" and not streams else None))
        return streams[-1]

    monkeypatch.setattr(kubernetes.stream, "stream", fake_stream)
    pids = tmp_path / "pids"
    script = (
        f"trap '' TERM; sleep 300 & a=$!; setsid sleep 301 & echo $$ $a $! > {pids}.tmp; mv {pids}.tmp {pids}; wait"
    )
    api = _api("http://127.0.0.1:9")
    if how == "interrupt":
        with pytest.raises(KeyboardInterrupt):
            api.exec("hpc", "p-0", "app", ["sh", "-c", script], timeout=60)
    else:
        assert api.exec("hpc", "p-0", "app", ["sh", "-c", script], timeout=1.0).rc == 124
    started = [int(p) for p in pids.read_text().split()]
    try:
        if len(streams) > 1:
            assert streams[1].proc.wait(timeout=60) == 0
        assert not [p for p in started if _running(p)]
        assert streams[0].closed
    finally:
        for pid in started:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_an_exec_that_ends_runs_no_ending(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubernetes.stream

    streams: list[_HostStream] = []

    def fake_stream(_fn: Any, _pod: str, _ns: str, command: list[str], **_kw: Any) -> _HostStream:
        streams.append(_HostStream(command))
        return streams[-1]

    monkeypatch.setattr(kubernetes.stream, "stream", fake_stream)
    result = _api("http://127.0.0.1:9").exec("hpc", "p-0", "app", ["sh", "-c", "echo hi; exit 3"], timeout=30)
    assert (result.rc, result.stdout, len(streams)) == (3, "hi\n", 1)


def test_an_exec_into_a_container_that_just_ended_is_the_server_s_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The error channel then holds the reason where the client expects an exit code, and its `returncode`
    raised ValueError through `minicluster up` (a fresh-clone CI run: hello's container ended while up waited)."""
    import kubernetes.stream

    class Ended(_HostStream):
        @property
        def returncode(self) -> int | None:
            raise ValueError(
                "invalid literal for int() with base 10: 'Internal error occurred: error executing command in "
                "container: failed to exec in container: container is in CONTAINER_EXITED state'"
            )

    monkeypatch.setattr(kubernetes.stream, "stream", lambda _fn, _pod, _ns, command, **_kw: Ended(command))
    with pytest.raises(ApiError) as failed:
        _api("http://127.0.0.1:9").exec("hpc", "p-0", "app", ["true"], timeout=30)
    assert failed.value.status == 500 and failed.value.transient
    assert failed.value.message.endswith("container is in CONTAINER_EXITED state")
