"""Objects a fresh cluster needs before users do: what kubeadm's add-ons would create, cut to ours.

CoreDNS runs beside the control plane as the user `system:coredns` (its certificate's CN) and may only read
what it serves: Services, EndpointSlices, Pods and Namespaces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from miniclusters.kube_shapes import Manifest
from miniclusters.localkube.layout import Layout

FIELD_MANAGER = "miniclusters-kube"


def coredns_rbac() -> list[Manifest]:
    role: Manifest = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "miniclusters:coredns", "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["endpoints", "services", "pods", "namespaces"],
                "verbs": ["list", "watch"],
            },
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    }
    binding: Manifest = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "miniclusters:coredns", "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "miniclusters:coredns"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:coredns"}],
    }
    return [role, binding]


def apply(layout: Layout, objects: list[Manifest]) -> None:
    """Server-side apply as the administrator (kubernetes' dynamic client)."""
    from kubernetes import config, dynamic

    # the client library is unannotated: these are the calls we make of it
    new_client: Callable[..., Any] = config.new_client_from_config
    dynamic_client: Callable[[Any], Any] = dynamic.DynamicClient
    api_client = new_client(config_file=str(layout.kubeconfig))
    try:
        client = dynamic_client(api_client)
        for body in objects:
            resource = client.resources.get(api_version=body["apiVersion"], kind=body["kind"])
            resource.server_side_apply(
                body=body, name=body["metadata"]["name"], field_manager=FIELD_MANAGER, force_conflicts=True
            )
    finally:
        api_client.close()
