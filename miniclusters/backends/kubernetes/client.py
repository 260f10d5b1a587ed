"""The real API layer over the official `kubernetes` client: one generic request path for every kind.

Generic paths (not the typed per-kind methods) keep objects as plain dicts end to end, which is what the
renderer produces and what the fake serves. The typed `patch_namespaced_pod_resize` (client >= 32) is used
for the pod `resize` subresource. Connection problems become UnreachableError with the server address.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from miniclusters.backends import exec_session
from miniclusters.backends.base import ExecResult, UnreachableError
from miniclusters.backends.kubernetes.api import (
    CONTENT_TYPES,
    POD,
    ApiError,
    Kind,
    PatchType,
    WatchEvent,
    kind_of,
)
from miniclusters.kube_shapes import KubeObject

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
REQUEST_TIMEOUT = (10.0, 60.0)  # connect, read (seconds)


class ExecOptions(TypedDict):
    """The exec stream's keyword options (the client's connect_get_namespaced_pod_exec)."""

    stderr: bool
    stdin: bool
    stdout: bool
    tty: bool
    container: NotRequired[str]


def _status_error(status: int, body: bytes | str | None, fallback: str) -> ApiError:
    """An ApiError from a metav1.Status body (or whatever the server sent)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("kind") == "Status":
        # metav1.StatusCause's Type is `reason` on the wire (as the real server sent for a refused resize)
        causes = (data.get("details") or {}).get("causes") or []
        types = tuple(str(c.get("reason")) for c in causes if isinstance(c, dict) and c.get("reason"))
        return ApiError(status, str(data.get("reason") or fallback), str(data.get("message") or text), types)
    return ApiError(status, fallback, text.strip() or fallback)


def load_api_client(context: str | None = None) -> tuple[Any, str]:
    """(ApiClient, default namespace) from the kubeconfig (context given or current) or the in-cluster config."""
    from kubernetes import client
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    config: Any = kube_config  # the client's config loaders are untyped

    # Read $KUBECONFIG now: the client computes its default location once, at import time.
    config_file = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    try:
        api_client = config.new_client_from_config(config_file=config_file, context=context)
        _, active = config.list_kube_config_contexts(config_file=config_file)
        if context:
            contexts, _ = config.list_kube_config_contexts(config_file=config_file)
            active = next((c for c in contexts if c["name"] == context), active)
        namespace = (active or {}).get("context", {}).get("namespace") or "default"
        return api_client, namespace
    except (ConfigException, FileNotFoundError, TypeError) as kube_error:
        if context:
            raise UnreachableError(f"cannot use kubeconfig context {context!r}: {kube_error}") from None
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException:
            raise UnreachableError(
                f"no Kubernetes configuration: {kube_error} (set KUBECONFIG or --context, or run in a cluster)"
            ) from None
        namespace = IN_CLUSTER_NAMESPACE.read_text().strip() if IN_CLUSTER_NAMESPACE.exists() else "default"
        return client.ApiClient(configuration), namespace


class RealKubeApi:
    """KubeApi over an `kubernetes.client.ApiClient`."""

    def __init__(self, api_client: Any, namespace: str = "default") -> None:
        self.client = api_client
        self.namespace = namespace
        self._exec_clients = threading.local()

    def _exec_client(self) -> Any:
        """This thread's own ApiClient for exec: `kubernetes.stream.stream` swaps its client's `request` for a
        websocket one while it connects, so a request another thread sent through a shared client in that
        moment became a websocket handshake ("Handshake status 200 OK", seen in the operator's log)."""
        from kubernetes import client

        mine = getattr(self._exec_clients, "client", None)
        if mine is None:
            mine = self._exec_clients.client = client.ApiClient(self.client.configuration)
        return mine

    @classmethod
    def from_kubeconfig(cls, context: str | None = None, namespace: str | None = None) -> RealKubeApi:
        api_client, default_namespace = load_api_client(context)
        return cls(api_client, namespace or default_namespace)

    @property
    def host(self) -> str:
        return str(self.client.configuration.host)

    # ------------------------------------------------------------------ transport
    def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        stream: bool = False,
        timeout: Any = REQUEST_TIMEOUT,
    ) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        request = self.client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.client.call_api(*request, _request_timeout=timeout)
        except ApiException as exc:
            raise _status_error(int(exc.status or 0), exc.body, str(exc.reason or "Error")) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise UnreachableError(f"cannot reach the Kubernetes API at {self.host}: {exc}") from None
        if stream:
            if not 200 <= response.status <= 299:
                response.read()
                raise _status_error(response.status, response.data, "Error")
            return response.response
        response.read()
        if not 200 <= response.status <= 299:
            raise _status_error(response.status, response.data, "Error")
        return json.loads(response.data) if response.data else {}

    def _ns(self, kind: Kind, namespace: str | None) -> str | None:
        """One object's namespace: the one given, else this client's default (as kubectl does; the real server
        answers 405 to a create without one, 404 to the rest). Lists and watches keep None: all namespaces."""
        return (namespace or self.namespace) if kind.namespaced else None

    # ------------------------------------------------------------------ verbs
    def get(self, kind: Kind, namespace: str | None, name: str) -> KubeObject:
        result: KubeObject = self._send("GET", kind.path(self._ns(kind, namespace), name))
        return result

    def list_objects(
        self, kind: Kind, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[KubeObject], str]:
        query = [("labelSelector", label_selector)] if label_selector else None
        data = self._send("GET", kind.path(namespace), query=query)
        items = data.get("items") or []
        for item in items:  # list items come without apiVersion/kind
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
        return items, str(data.get("metadata", {}).get("resourceVersion", ""))

    def create(self, obj: KubeObject) -> KubeObject:
        kind = kind_of(obj)
        result: KubeObject = self._send("POST", kind.path(self._ns(kind, obj["metadata"].get("namespace"))), body=obj)
        return result

    def apply(self, obj: KubeObject, field_manager: str, force: bool = True) -> KubeObject:
        kind = kind_of(obj)
        meta = obj["metadata"]
        query: list[tuple[str, Any]] = [("fieldManager", field_manager)]
        if force:
            query.append(("force", True))
        result: KubeObject = self._send(
            "PATCH", kind.path(self._ns(kind, meta.get("namespace")), meta["name"]), query, obj, CONTENT_TYPES["apply"]
        )
        return result

    def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        body: Any,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject:
        if kind == POD and subresource == "resize":
            return self._resize(namespace or self.namespace, name, body, patch_type, field_manager)
        query = [("fieldManager", field_manager)] if field_manager else None
        result: KubeObject = self._send(
            "PATCH", kind.path(self._ns(kind, namespace), name, subresource), query, body, CONTENT_TYPES[patch_type]
        )
        return result

    def _resize(
        self, namespace: str, name: str, body: Any, patch_type: PatchType, field_manager: str | None
    ) -> KubeObject:
        """PATCH pods/NAME/resize through the typed method (kubernetes client >= 32)."""
        import urllib3
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        core = client.CoreV1Api(self.client)
        try:
            pod = core.patch_namespaced_pod_resize(
                name, namespace, body, field_manager=field_manager, _content_type=CONTENT_TYPES[patch_type]
            )
        except ApiException as exc:
            raise _status_error(int(exc.status or 0), exc.body, str(exc.reason or "Error")) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise UnreachableError(f"cannot reach the Kubernetes API at {self.host}: {exc}") from None
        result: KubeObject = self.client.sanitize_for_serialization(pod)
        return result

    def replace(self, obj: KubeObject, subresource: str | None = None) -> KubeObject:
        kind = kind_of(obj)
        meta = obj["metadata"]
        result: KubeObject = self._send(
            "PUT", kind.path(self._ns(kind, meta.get("namespace")), meta["name"], subresource), body=obj
        )
        return result

    def delete(self, kind: Kind, namespace: str | None, name: str, propagation: str = "Background") -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        self._send("DELETE", kind.path(self._ns(kind, namespace), name), body=body)

    def watch(
        self,
        kind: Kind,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int = 60,
        label_selector: str | None = None,
    ) -> Iterator[WatchEvent]:
        query: list[tuple[str, Any]] = [
            ("watch", True),
            ("allowWatchBookmarks", True),
            ("timeoutSeconds", timeout_seconds),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if label_selector:
            query.append(("labelSelector", label_selector))
        raw = self._send("GET", kind.path(namespace), query, stream=True, timeout=(10.0, timeout_seconds + 10))
        try:
            for line in _lines(raw.stream(65536)):
                event = json.loads(line)
                obj: KubeObject = event["object"] if event.get("object") else {}  # as the server sent it
                yield WatchEvent(str(event.get("type")), obj)
        finally:
            raw.release_conn()

    def served_resources(self, api_version: str) -> set[str]:
        root = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        data = self._send("GET", root)
        return {str(r.get("name")) for r in data.get("resources", [])}

    def exec(
        self, namespace: str, pod: str, container: str | None, argv: list[str], timeout: float = 60.0
    ) -> ExecResult:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        core = client.CoreV1Api(self._exec_client())
        token = exec_session.new_token()
        kwargs: ExecOptions = {"stderr": True, "stdin": False, "stdout": True, "tty": False}
        if container:
            kwargs["container"] = container
        try:
            ws = stream(
                core.connect_get_namespaced_pod_exec,
                pod,
                namespace,
                command=exec_session.marked(argv, token),
                _preload_content=False,
                **kwargs,
            )
        except ApiException as exc:
            raise _exec_error(exc) from None
        finished = False
        try:
            ws.run_forever(timeout=timeout)
            finished = not ws.is_open()
            out, err = ws.read_stdout() or "", ws.read_stderr() or ""
            rc = _exit_code(ws) if finished else None
        finally:
            ws.close()  # without a tty, closing the stream leaves the process running: end it (exec_session.py)
            if not finished:
                self._end_exec(core, stream, namespace, pod, kwargs, token)
        return ExecResult(124 if rc is None else int(rc), out, err)

    @staticmethod
    def _end_exec(core: Any, stream: Any, namespace: str, pod: str, kwargs: ExecOptions, token: str) -> None:
        """Run the ending of exec `token` in its pod: best effort, the exec is being given up on already."""
        from kubernetes.client.exceptions import ApiException
        from websocket import WebSocketException

        try:
            ws = stream(
                core.connect_get_namespaced_pod_exec,
                pod,
                namespace,
                command=exec_session.end_argv(token),
                _preload_content=False,
                **kwargs,
            )
            try:
                ws.run_forever(timeout=exec_session.END_GRACE + 30.0)
            finally:
                ws.close()
        except (ApiException, WebSocketException, OSError):  # the pod or the server is gone, and what ran there
            pass

    def logs(self, namespace: str, pod: str, container: str | None, follow: bool = False) -> Iterator[str]:
        query: list[tuple[str, Any]] = [("follow", follow)]
        if container:
            query.append(("container", container))
        raw = self._send("GET", POD.path(namespace, pod, "log"), query, stream=True, timeout=(10.0, None))
        try:
            yield from _lines(raw.stream(4096))
        finally:
            raw.release_conn()


HANDSHAKE = re.compile(r"^Handshake status (\d{3})")


def _exit_code(ws: Any) -> int | None:
    """The command's exit code from the error channel. When the exec itself failed there the channel holds the
    server's reason where the client expects a number (`container is in CONTAINER_EXITED state`: the container
    ended between the pod's listing and the exec) and the client raises ValueError: that is the server's 500."""
    try:
        code: int | None = ws.returncode
        return code
    except ValueError as exc:
        reason = str(exc).partition(": ")[2].strip("'") or str(exc)
        raise ApiError(500, "InternalError", reason) from None


def _exec_error(exc: Any) -> ApiError:
    """The server's answer to an exec it refused. The client's websocket reports a refused upgrade as status 0
    (a lost connection, retried) with the HTTP status and body in its reason: `Handshake status 400 Bad Request
    -+-+- {headers} -+-+- {"kind":"Status",...,"message":"pod big does not have a host assigned"}` (the real
    server, v1.37.2, for a pod not yet scheduled); that status and Status are the answer."""
    reason = str(exc.reason or "")
    handshake = HANDSHAKE.match(reason) if not exc.status else None
    if handshake:
        return _status_error(int(handshake.group(1)), reason.rpartition(" -+-+- ")[2].strip(), "Error")
    return _status_error(int(exc.status or 0), exc.body, reason or "Error")


def _lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """Whole lines from a byte stream whose chunks split lines anywhere."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line.decode("utf-8", "replace")
    if buffer.strip():
        yield buffer.decode("utf-8", "replace")
