"""Size ranges: a MiniCluster scales within [max(1, minSize), maxSize] and never loses its lead (index 0).

Scaling down removes the highest indexes (Kubernetes' elastic Indexed Job behaviour, mirrored by the local
backend), so any size of at least 1 keeps the lead broker.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SizeRange:
    """Allowed sizes, inclusive. Build it with `size_range` so the floor of 1 is never forgotten."""

    minimum: int
    maximum: int

    def __contains__(self, size: object) -> bool:
        return isinstance(size, int) and not isinstance(size, bool) and self.minimum <= size <= self.maximum

    def clamp(self, size: int) -> int:
        """The nearest allowed size (what an autoscaler may ask for)."""
        return max(self.minimum, min(self.maximum, size))

    def violation(self, size: int, min_size: int = 1) -> str | None:
        """Why `size` is not allowed (naming the bound it crosses), or None when it is.

        `min_size` is the spec's minSize as written, so the message names the quorum when that is the bound.
        """
        if size in self:
            return None
        if size < self.minimum:
            if min_size > 1:
                return f"below spec.minSize={min_size} (the broker quorum)"
            return "below 1 (the lead broker, pod index 0, is never removed)"
        return f"above spec.maxSize={self.maximum} (hosts pre-registered in the broker config)"


def size_range(min_size: int, max_size: int) -> SizeRange:
    """[max(1, minSize), maxSize]: the quorum floor (at least 1, so the lead stays) up to the registered hosts."""
    return SizeRange(max(1, min_size), max_size)


def removed_indexes(current: int, size: int) -> list[int]:
    """Pod indexes a scale-down removes: the highest ones, never index 0."""
    return list(range(max(size, 1), current))
