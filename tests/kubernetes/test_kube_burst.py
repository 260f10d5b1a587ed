"""The `kubernetes` burst plugin against the API fake: the Service it asks for (NodePort, LoadBalancer), the
follower-only MiniCluster in another cluster and namespace (its broker config reaches the lead through the
Service), and its deletion; credentials problems are a verdict, never an exception."""

from __future__ import annotations

import tomllib

import pytest

from broker.curve_cert import generate_certificate, render_zcert
from bursting.plugin import Burst, BurstError, LeadContext
from bursting.plugins.kubernetes import KubernetesPlugin
from miniclusters.backends.kubernetes.api import CONFIG_MAP, JOB, MINICLUSTER, SERVICE, ApiError
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.kube_shapes import KubeObject
from miniclusters.render.layout import BROKER_TOML, ENTRYPOINT
from miniclusters.testing.fake_kube import FakeKube

LEAD_SPEC: KubeObject = {
    "apiVersion": "miniclusters.dev/v1alpha1",
    "kind": "MiniCluster",
    "metadata": {"name": "demo", "namespace": "hpc"},
    "spec": {"size": 2, "maxSize": 2, "interactive": True, "containers": [{"image": "app:1", "runFlux": True}]},
}


def make_plugin(lead: FakeKube, remote: FakeKube, **options: str) -> KubernetesPlugin:
    cert = render_zcert(generate_certificate("demo"))
    context = LeadContext("demo", LEAD_SPEC, cert, namespace="hpc", options=options)
    backend = KubernetesBackend(api=remote, namespace="burst", sleep=lambda _s: None, poll_interval=0.0)
    return KubernetesPlugin(context, lead_api=lead, burst_backend=backend)


def test_nodeport_service_follower_cluster_and_deletion() -> None:
    lead, remote = FakeKube(namespace="hpc"), FakeKube(namespace="default")
    plugin = make_plugin(lead, remote, node_address="192.0.2.10")
    assert plugin.can_satisfy(2).ok
    burst = Burst("demo-b1", 2, "kubernetes", ("demo-0", "demo-1"))
    address, port = plugin.expose(burst)
    service = lead.stored(SERVICE, "demo-b1-lead", "hpc")
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["selector"] == {"job-name": "demo", "batch.kubernetes.io/job-completion-index": "0"}
    assert service["spec"]["ports"][0]["targetPort"] == 8050
    assert (address, port) == ("192.0.2.10", service["spec"]["ports"][0]["nodePort"])
    assert 30000 <= port <= 32767
    assert plugin.expose(burst) == (address, port)  # idempotent: the same Service, the same port

    plugin.launch(Burst("demo-b1", 2, "kubernetes", ("demo-0", "demo-1"), address, port))
    follower = remote.stored(MINICLUSTER, "demo-b1", "burst")
    assert follower["spec"]["flux"]["bursting"]["leadBroker"] == {
        "address": "192.0.2.10",
        "name": "demo",
        "size": 2,
        "port": port,
    }
    job = remote.stored(JOB, "demo-b1", "burst")
    assert job["spec"]["parallelism"] == 2
    config = next(c for c in remote.all_of(CONFIG_MAP, "burst") if BROKER_TOML in c.get("data", {}))
    hosts = tomllib.loads(config["data"][BROKER_TOML])["bootstrap"]["hosts"]
    assert hosts == [
        {"host": "demo-0", "connect": f"tcp://192.0.2.10:{port}"},
        {"host": "demo-1"},
        {"host": "demo-b1-0", "parent": "demo-0"},
        {"host": "demo-b1-1", "parent": "demo-0"},
    ]
    assert "if false; then" in config["data"][ENTRYPOINT]  # every pod of a burst is a follower

    plugin.teardown(burst)
    with pytest.raises(ApiError) as gone:
        remote.get(MINICLUSTER, "burst", "demo-b1")
    assert gone.value.not_found
    assert remote.all_of(JOB, "burst") == []  # owned objects go with it
    with pytest.raises(ApiError):
        lead.get(SERVICE, "hpc", "demo-b1-lead")
    plugin.teardown(burst)  # idempotent


def test_loadbalancer_without_an_address_and_missing_credentials_are_reasons() -> None:
    lead, remote = FakeKube(namespace="hpc"), FakeKube(namespace="default")
    plugin = make_plugin(lead, remote, service_type="LoadBalancer")
    with pytest.raises(BurstError, match="waiting for the LoadBalancer's address"):
        plugin.expose(Burst("demo-b1", 1, "kubernetes"))
    assert lead.stored(SERVICE, "demo-b1-lead", "hpc")["spec"]["ports"][0]["nodePort"] >= 30000
    remote.crd_installed = False
    verdict = plugin.can_satisfy(1)
    assert not verdict.ok and "CRD" in verdict.reason
    assert not make_plugin(lead, remote, service_type="ClusterIP").can_satisfy(1).ok
