"""Pure sizing rules shared by every backend: scaling stays within [max(1, minSize), maxSize].

The lead broker is pod index 0 and scaling down removes the highest indexes (Kubernetes' elastic Indexed Job
behaviour, mirrored by the local backend), so a size of at least 1 can never remove the lead.
"""

from __future__ import annotations

from dataclasses import dataclass

from miniclusters.api.spec import MiniClusterSpec
from miniclusters.backends.base import InvalidRequestError


@dataclass(frozen=True)
class SizeRange:
    minimum: int
    maximum: int

    def __contains__(self, size: object) -> bool:
        return isinstance(size, int) and self.minimum <= size <= self.maximum


def size_range(spec: MiniClusterSpec) -> SizeRange:
    """Allowed sizes: the quorum floor (minSize, at least 1, so the lead stays) up to the pre-registered maxSize."""
    return SizeRange(max(1, spec.min_size), spec.effective_max_size)


def check_scale(spec: MiniClusterSpec, size: int, name: str = "") -> int:
    """The size to scale to, or InvalidRequestError saying which bound was crossed; nothing changes on error."""
    allowed = size_range(spec)
    if size in allowed:
        return size
    who = f"MiniCluster {name!r}: " if name else ""
    if size < allowed.minimum:
        why = (
            f"below spec.minSize={spec.min_size} (the broker quorum)"
            if spec.min_size > 1
            else "below 1 (the lead broker, pod index 0, is never removed)"
        )
    else:
        why = f"above spec.maxSize={spec.effective_max_size} (hosts pre-registered in the broker config)"
    raise InvalidRequestError(f"{who}size {size} is {why}; allowed range is [{allowed.minimum}, {allowed.maximum}]")


def removed_indexes(current: int, size: int) -> list[int]:
    """Pod indexes a scale-down removes: the highest ones, never index 0."""
    return list(range(max(size, 1), current))
