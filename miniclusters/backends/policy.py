"""Sizing rules for the backends, as MiniCluster messages over the one size model (elasticity/model/size.py).

The lead broker is pod index 0 and scaling down removes the highest indexes (Kubernetes' elastic Indexed Job
behaviour, mirrored by the local backend), so a size of at least 1 can never remove the lead.
"""

from __future__ import annotations

from elasticity.model.size import SizeRange, removed_indexes, size_range
from miniclusters.backends.base import InvalidRequestError

__all__ = ["SizeRange", "check_scale", "removed_indexes", "size_range"]


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
