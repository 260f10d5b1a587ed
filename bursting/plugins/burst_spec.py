"""A burst as a MiniCluster: the lead's containers, follower-only pods under the burst's name. Pure."""

from __future__ import annotations

import copy

from bursting.plugin import Burst
from miniclusters.api.hosts import burst_registry
from miniclusters.kube_shapes import Manifest, ObjectMeta


def burst_minicluster(lead_spec: Manifest, burst: Burst, namespace: str | None = None) -> Manifest:
    """A follower-only MiniCluster: `spec.flux.bursting.leadBroker` points at the lead (the Flux Operator's own
    field for a burst), and `hostlist` is the lead's registered hosts then the burst's pods, so each burst
    broker takes exactly the rank the lead registered for it."""
    spec = copy.deepcopy(lead_spec.get("spec", {}))
    flux = spec.setdefault("flux", {})
    flux["bursting"] = {
        "leadBroker": {
            "address": burst.lead_address,
            "name": lead_spec.get("metadata", {}).get("name", ""),
            "size": len(burst.lead_hosts),
            "port": burst.lead_port,
        },
        "hostlist": burst_registry(burst.lead_hosts, burst.name, burst.nodes).hostlist(),
    }
    for key in ("restful", "archive", "profiling"):
        spec.pop(key, None)
    spec.update(size=burst.nodes, maxSize=burst.nodes, interactive=True)
    spec.pop("minSize", None)
    for container in spec.get("containers", []):
        if container.get("runFlux"):
            container.pop("command", None)
            container.pop("batch", None)
            container.pop("launcher", None)
    metadata: ObjectMeta = {
        "name": burst.name,
        "labels": {"miniclusters.dev/burst-of": lead_spec.get("metadata", {}).get("name", "")},
    }
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": lead_spec.get("apiVersion", "miniclusters.dev/v1alpha1"),
        "kind": "MiniCluster",
        "metadata": metadata,
        "spec": spec,
    }
