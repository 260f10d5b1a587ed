"""`kubernetes`: a burst as a follower-only MiniCluster in another kubeconfig context or namespace.

The burst's brokers reach the lead through a Service this plugin asks for in the lead's cluster: `NodePort` (a
node's address and the allocated port) or `LoadBalancer` (the address the cloud gives; until it does, the job
waits with that reason). The follower MiniCluster is created and deleted through the Kubernetes backend.

Settings (LeadContext.options, else the environment):
  burst_context / $MINICLUSTERS_BURST_CONTEXT        kubeconfig context of the burst (default: the current)
  burst_namespace / $MINICLUSTERS_BURST_NAMESPACE    namespace of the burst (default: the context's)
  service_type / $MINICLUSTERS_BURST_SERVICE_TYPE    NodePort (default) or LoadBalancer
  node_address / $MINICLUSTERS_BURST_NODE_ADDRESS    a node address for NodePort (default: the lead pod's hostIP)
  max_nodes / $MINICLUSTERS_BURST_K8S_MAX            the most nodes one burst may have (default 64)
"""

from __future__ import annotations

import os
from typing import Any

from bursting.plugin import Burst, BurstError, LeadContext, Verdict
from bursting.plugins.follower import delete_followers, launch_followers
from miniclusters.backends.base import BackendError
from miniclusters.backends.kubernetes.api import POD, SERVICE, ApiError, KubeApi
from miniclusters.kube_shapes import KubeObject
from miniclusters.render.layout import INDEX_LABEL

SERVICE_TYPES = ("NodePort", "LoadBalancer")


def lead_service(cluster: str, burst: Burst, namespace: str, service_type: str, port: int) -> KubeObject:
    """The Service exposing the lead broker's overlay port (pod index 0 of the lead's Job) to one burst."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{burst.name}-lead",
            "namespace": namespace,
            "labels": {"miniclusters.dev/burst-of": cluster, "miniclusters.dev/burst": burst.name},
        },
        "spec": {
            "type": service_type,
            "selector": {"job-name": cluster, INDEX_LABEL: "0"},
            "ports": [{"name": "broker", "protocol": "TCP", "port": port, "targetPort": port}],
        },
    }


class KubernetesPlugin:
    name = "kubernetes"

    def __init__(self, context: LeadContext, lead_api: KubeApi | None = None, burst_backend: Any = None) -> None:
        self.context = context
        self._lead_api = lead_api
        self._backend = burst_backend

    def option(self, key: str, env: str, default: str = "") -> str:
        return self.context.options.get(key) or os.environ.get(env) or default

    @property
    def lead_namespace(self) -> str:
        return self.context.namespace or (self.lead_api.namespace if self._lead_api else "default")

    @property
    def lead_api(self) -> KubeApi:
        if self._lead_api is None:
            from miniclusters.backends.kubernetes.client import RealKubeApi

            self._lead_api = RealKubeApi.from_kubeconfig(None, self.context.namespace or None)
        return self._lead_api

    @property
    def backend(self) -> Any:
        if self._backend is None:
            from miniclusters.backends.kubernetes.backend import KubernetesBackend

            context = self.option("burst_context", "MINICLUSTERS_BURST_CONTEXT") or None
            namespace = self.option("burst_namespace", "MINICLUSTERS_BURST_NAMESPACE") or None
            self._backend = KubernetesBackend(context=context, namespace=namespace)
        return self._backend

    def can_satisfy(self, nodes: int) -> Verdict:
        service_type = self.option("service_type", "MINICLUSTERS_BURST_SERVICE_TYPE", "NodePort")
        if service_type not in SERVICE_TYPES:
            return Verdict(False, f"service_type {service_type!r}: expected NodePort or LoadBalancer")
        limit = int(self.option("max_nodes", "MINICLUSTERS_BURST_K8S_MAX", "64"))
        limit = min(limit, self.context.size_limit(self.name) or limit)
        if nodes > limit:
            return Verdict(False, f"{nodes} node(s) asked, at most {limit} per burst")
        try:
            self.backend.check_crd()  # credentials, reachability, the CRD in the burst's cluster
        except BackendError as exc:
            return Verdict(False, str(exc))
        except Exception as exc:  # no kubeconfig at all, a broken one
            return Verdict(False, f"cannot reach the burst's cluster: {exc}")
        return Verdict(True)

    def expose(self, burst: Burst) -> tuple[str, int]:
        service_type = self.option("service_type", "MINICLUSTERS_BURST_SERVICE_TYPE", "NodePort")
        port = self.context.broker_port
        wanted = lead_service(self.context.cluster, burst, self.lead_namespace, service_type, port)
        name = wanted["metadata"]["name"]
        try:
            try:
                service = self.lead_api.get(SERVICE, self.lead_namespace, name)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                service = self.lead_api.create(wanted)
        except ApiError as exc:
            raise BurstError(f"asking for Service {name!r} ({service_type}): {exc.status} {exc.message}") from None
        node_port = int(service["spec"]["ports"][0].get("nodePort") or 0)
        if service_type == "LoadBalancer":
            ingress = service.get("status", {}).get("loadBalancer", {}).get("ingress") or []
            if not ingress:
                raise BurstError(f"Service {name!r}: waiting for the LoadBalancer's address")
            return str(ingress[0].get("ip") or ingress[0].get("hostname")), port
        return self._node_address(), node_port

    def _node_address(self) -> str:
        address = self.option("node_address", "MINICLUSTERS_BURST_NODE_ADDRESS")
        if address:
            return address
        try:
            pods, _ = self.lead_api.list_objects(POD, self.lead_namespace, f"job-name={self.context.cluster}")
        except ApiError as exc:
            raise BurstError(f"finding the lead pod's node: {exc.status} {exc.message}") from None
        for pod in pods:
            labels = pod.get("metadata", {}).get("labels", {})
            host_ip = pod.get("status", {}).get("hostIP")
            if labels.get(INDEX_LABEL) == "0" and host_ip:
                return str(host_ip)
        raise BurstError("no address for the lead's node yet (set node_address / $MINICLUSTERS_BURST_NODE_ADDRESS)")

    def launch(self, burst: Burst) -> None:
        namespace = self.option("burst_namespace", "MINICLUSTERS_BURST_NAMESPACE") or None
        launch_followers(self.backend, self.context, burst, namespace)

    def teardown(self, burst: Burst) -> None:
        delete_followers(self.backend, burst)
        try:
            self.lead_api.delete(SERVICE, self.lead_namespace, f"{burst.name}-lead")
        except ApiError as exc:
            if not exc.not_found:
                raise BurstError(f"deleting Service {burst.name}-lead: {exc.status} {exc.message}") from None


def plugin(context: LeadContext) -> KubernetesPlugin:
    """Entry point `kubernetes` of `miniclusters.burst_plugins`."""
    return KubernetesPlugin(context)
