"""Sizing rules for the backends, as MiniCluster messages over the one size model (elasticity/model/size.py).

The lead broker is pod index 0 and scaling down removes the highest indexes (Kubernetes' elastic Indexed Job
behaviour, mirrored by the local backend), so a size of at least 1 can never remove the lead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elasticity.model.size import SizeRange, removed_indexes, size_range
from miniclusters.backends.base import InvalidRequestError

__all__ = ["SizeRange", "check_scale", "removed_indexes", "size_range", "spec_size_patch"]


def check_scale(min_size: int, max_size: int, size: int, name: str = "") -> int:
    """The size to scale to, or InvalidRequestError saying which bound was crossed; nothing changes on error.

    `max_size` is the number of hosts registered when the cluster was created (never derived from the size it is
    being scaled from).
    """
    allowed = size_range(min_size, max_size)
    why = allowed.violation(size, min_size)
    if why is None:
        return size
    who = f"MiniCluster {name!r}: " if name else ""
    raise InvalidRequestError(f"{who}size {size} is {why}; allowed range is [{allowed.minimum}, {allowed.maximum}]")


# open: a MiniCluster's spec as the API returns it
def spec_size_patch(spec: Mapping[str, Any], size: int, registered: int) -> dict[str, int]:
    """The change to a MiniCluster's `spec` that sets its size: the one place a size is written.

    Every path that scales (the CLI, the operator's callers, autoscalers, an HPA through the scale subresource's
    writer, the local backend) goes through its backend's actuator, which writes exactly this. When the spec has
    no maxSize, the ceiling was derived from the size at creation; it is pinned to the `registered` hosts here,
    so scaling down never lowers the ceiling that the broker config and the pods were created with.
    """
    change = {"size": size}
    if not spec.get("maxSize"):
        change["maxSize"] = registered
    return change
