"""The custom metrics API the operator serves behind the aggregator (operator/metrics_api.py): every MiniCluster's
metrics read from its own lead, the objects that register it (valid on the fake, which checks the official
schema), and the HTTPS server a client verifies with the CA the APIService carries."""

from __future__ import annotations

import base64
import socket
import ssl
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from broker.rest.metrics import METRIC_NAMES
from miniclusters.backends.kubernetes.api import API_SERVICE, SECRET, SERVICE
from miniclusters.localkube.pki import Authority, Identity
from miniclusters.operator import install as installer
from miniclusters.operator.manifests import NAMESPACE as OPERATOR_NAMESPACE
from miniclusters.operator.metrics_api import (
    MetricsTLS,
    cached,
    metrics_app,
    serve,
    service_names,
)
from miniclusters.testing.fake_kube import FakeKube
from tests.waiting import wait_until

PREFIX = "/apis/custom.metrics.k8s.io/v1beta2"


def _values(sched: int) -> dict[str, int]:
    return {**{name: 0 for name in METRIC_NAMES}, "job_queue_state_sched_count": sched, "node_up_count": 1}


def _source(asked: list[tuple[str, str | None, str]]):
    def read(kind: str, namespace: str | None, name: str) -> Mapping[str, int]:
        asked.append((kind, namespace, name))
        if kind != "MiniCluster":
            raise LookupError(f"not a MiniCluster: {kind}")
        if name == "down":
            raise RuntimeError("no broker socket")
        return _values(3 if name == "busy" else 0)

    return read


def test_each_minicluster_s_metric_comes_from_its_own_lead() -> None:
    asked: list[tuple[str, str | None, str]] = []
    client = TestClient(metrics_app(_source(asked)))
    listed = client.get(PREFIX).json()
    assert listed["kind"] == "APIResourceList" and len(listed["resources"]) == len(METRIC_NAMES)
    got = client.get(f"{PREFIX}/namespaces/hpc/miniclusters.miniclusters.dev/busy/job_queue_state_sched_count")
    assert got.status_code == 200
    (item,) = got.json()["items"]
    assert item["value"] == "3" and item["describedObject"] == {
        "kind": "MiniCluster",
        "name": "busy",
        "namespace": "hpc",
        "apiVersion": "miniclusters.dev/v1alpha1",
    }
    idle = client.get(f"{PREFIX}/namespaces/hpc/miniclusters.miniclusters.dev/idle/job_queue_state_sched_count")
    assert idle.json()["items"][0]["value"] == "0"
    assert ("MiniCluster", "hpc", "busy") in asked and ("MiniCluster", "hpc", "idle") in asked
    pod = client.get(f"{PREFIX}/namespaces/hpc/pods/busy-0/job_queue_state_sched_count")
    assert pod.status_code == 404 and "not a MiniCluster" in pod.json()["message"]
    down = client.get(f"{PREFIX}/namespaces/hpc/miniclusters.miniclusters.dev/down/node_up_count")
    assert down.status_code == 503 and "no broker socket" in down.json()["message"]
    assert client.get("/healthz").status_code == 200


def test_a_lead_is_read_at_most_once_per_cache_period() -> None:
    now = [0.0]
    asked: list[tuple[str, str | None, str]] = []
    read = cached(_source(asked), seconds=2.0, clock=lambda: now[0])
    for _ in range(5):
        read("MiniCluster", "hpc", "busy")
    now[0] = 2.5
    read("MiniCluster", "hpc", "busy")
    assert len(asked) == 2


def _tls(folder: Path) -> MetricsTLS:
    authority = Authority(folder, "ca", "test CA")
    issued = authority.issue(
        Identity("serving", "localhost", client=False, server=True, dns_names=("localhost", *service_names("x")))
    )
    return MetricsTLS(
        issued.certificate.read_bytes(), issued.key.read_bytes(), authority.issued.certificate.read_bytes()
    )


def test_install_registers_the_api_with_the_aggregator_verifying_our_certificate() -> None:
    fake = FakeKube(namespace="default", crd_installed=False, start_pods=False)
    with tempfile.TemporaryDirectory() as folder:
        tls = _tls(Path(folder))
    objects = installer.install_objects(metrics_tls=tls)
    kinds = [o["kind"] for o in objects]
    assert kinds.index("Secret") < kinds.index("Deployment") < kinds.index("APIService")
    for obj in objects:
        fake.apply(obj, "miniclusters-install")
    api_service = fake.get(API_SERVICE, None, "v1beta2.custom.metrics.k8s.io")
    assert base64.b64decode(api_service["spec"]["caBundle"]) == tls.authority
    assert api_service["spec"]["service"] == {
        "namespace": OPERATOR_NAMESPACE,
        "name": "miniclusters-operator-metrics",
        "port": 443,
    }
    assert "insecureSkipTLSVerify" not in api_service["spec"]
    service = fake.get(SERVICE, OPERATOR_NAMESPACE, "miniclusters-operator-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == 6443
    secret = fake.get(SECRET, OPERATOR_NAMESPACE, "miniclusters-operator-metrics-tls")
    assert base64.b64decode(secret["data"]["tls.crt"]) == tls.certificate
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--custom-metrics-port") + 1] == "6443"
    # uninstall removes the cluster-wide APIService too (the namespace's deletion would not)
    installer.uninstall(fake, installer.removable_objects(), lambda _: None, sleep=lambda _: None)
    assert not fake.list_objects(API_SERVICE, None)[0]


def test_the_server_answers_over_https_a_client_verifies_with_the_ca(tmp_path: Path) -> None:
    tls = _tls(tmp_path)
    (tmp_path / "tls.crt").write_bytes(tls.certificate)
    (tmp_path / "tls.key").write_bytes(tls.key)
    (tmp_path / "ca.crt").write_bytes(tls.authority)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    stop = threading.Event()
    thread = serve(_source([]), port, str(tmp_path), stop)
    try:
        url = f"https://localhost:{port}{PREFIX}/namespaces/hpc/miniclusters.miniclusters.dev/busy/job_queue_state_sched_count"

        def answered() -> httpx.Response | None:
            try:
                return httpx.get(url, verify=ssl.create_default_context(cafile=str(tmp_path / "ca.crt")))
            except httpx.ConnectError:
                return None

        answer = wait_until("the metrics server answers over HTTPS", answered, timeout=20)
        assert answer.status_code == 200 and answer.json()["items"][0]["value"] == "3"
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
