"""The custom metrics API (custom.metrics.k8s.io/v1beta2) of every MiniCluster, served by the operator behind the
API server's aggregator, so that a HorizontalPodAutoscaler can drive a MiniCluster's /scale from its queue.

flux-metrics-api serves these metrics for one instance; an APIService names one backend for the whole cluster,
so here the operator answers for all MiniClusters: each request reads the lead of the MiniCluster asked about
(``source_for``: the same values the lead's own REST server computes, broker/rest/metrics.py). Read-only counts,
never jobs: the aggregator authenticates and authorizes the caller before it forwards a request (the HPA
controller may `get` custom.metrics.k8s.io by its bootstrap role).

`metrics_objects` is pure (the Secret with the serving certificate, the Service, the APIService whose caBundle
lets the aggregator verify us); `serve` is the thin shell that runs the HTTPS server on a thread.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.rest.metrics import GROUP_VERSION, SourceFor, metrics_router
from miniclusters.kube_shapes import Manifest, ObjectMeta

SERVICE = "miniclusters-operator-metrics"
TLS_SECRET = "miniclusters-operator-metrics-tls"
TLS_DIR = "/etc/miniclusters/metrics-tls"
PORT = 6443
API_SERVICE = f"v1beta2.{GROUP_VERSION.split('/')[0]}"
CACHE_SECONDS = 2.0
"""How long one reading of a lead answers (the HPA controller and the aggregator's checks ask often)."""


@dataclass(frozen=True)
class MetricsTLS:
    """The serving certificate and key (PEM) and the CA that signed it (the APIService's caBundle)."""

    certificate: bytes
    key: bytes
    authority: bytes


def service_names(namespace: str) -> tuple[str, ...]:
    """The DNS names the aggregator may use for the Service."""
    return (SERVICE, f"{SERVICE}.{namespace}", f"{SERVICE}.{namespace}.svc", f"{SERVICE}.{namespace}.svc.cluster.local")


def metrics_objects(
    namespace: str, labels: Mapping[str, str], selector: Mapping[str, str], tls: MetricsTLS | None
) -> list[Manifest]:
    """Secret (the serving certificate), Service (port 443 to the operator's PORT) and the APIService registering
    custom.metrics.k8s.io/v1beta2 with the aggregator. Without ``tls`` only what names them (to delete them)."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    meta: ObjectMeta = {"namespace": namespace, "labels": dict(labels)}
    secret: Manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": TLS_SECRET, **meta},
        "type": "kubernetes.io/tls",
    }
    if tls is not None:
        secret["data"] = {"tls.crt": b64(tls.certificate), "tls.key": b64(tls.key)}
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, **meta},
        "spec": {
            "selector": dict(selector),
            "ports": [{"name": "https", "port": 443, "targetPort": PORT, "protocol": "TCP"}],
        },
    }
    group, version = GROUP_VERSION.split("/")
    api_service: Manifest = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE, "labels": dict(labels)},
        "spec": {
            "group": group,
            "version": version,
            "service": {"namespace": namespace, "name": SERVICE, "port": 443},
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    if tls is not None:
        api_service["spec"]["caBundle"] = b64(tls.authority)
    return [secret, service, api_service]


def cached(
    source_for: SourceFor, seconds: float = CACHE_SECONDS, clock: Callable[[], float] = time.monotonic
) -> SourceFor:
    """``source_for`` read at most once per ``seconds`` per object."""
    seen: dict[tuple[str, str | None, str], tuple[float, Mapping[str, int]]] = {}
    lock = threading.Lock()

    def read(kind: str, namespace: str | None, name: str) -> Mapping[str, int]:
        key = (kind, namespace, name)
        with lock:
            hit = seen.get(key)
        if hit is not None and clock() - hit[0] < seconds:
            return hit[1]
        values = source_for(kind, namespace, name)
        with lock:
            seen[key] = (clock(), values)
        return values

    return read


def metrics_app(source_for: SourceFor) -> Any:
    """The ASGI app: the custom metrics routes and a health check."""
    from fastapi import FastAPI

    app = FastAPI(title="miniclusters custom metrics", docs_url=None, redoc_url=None)
    app.include_router(metrics_router(source_for=cached(source_for)))

    @app.get("/healthz")
    def healthz() -> str:
        return "ok"

    return app


def serve(source_for: SourceFor, port: int, tls_dir: str, stop: threading.Event) -> threading.Thread:
    """Serve HTTPS on ``port`` with the certificate in ``tls_dir`` on a thread until ``stop`` is set."""
    import uvicorn

    config = uvicorn.Config(
        metrics_app(source_for),
        host="0.0.0.0",
        port=port,
        ssl_certfile=f"{tls_dir}/tls.crt",
        ssl_keyfile=f"{tls_dir}/tls.key",
        log_level="warning",
    )
    server = uvicorn.Server(config)

    def stop_when_told() -> None:
        stop.wait()
        server.should_exit = True

    def run() -> None:
        threading.Thread(target=stop_when_told, daemon=True).start()
        server.run()

    thread = threading.Thread(target=run, name="custom-metrics", daemon=True)
    thread.start()
    return thread
