"""The shared traces for the scheduling tests: ``../shared/traces`` beside the checkout, or $MINICLUSTER_TRACES."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from elasticity.sim.traces import ENV, trace_path


@pytest.fixture
def shared_trace() -> Callable[[str], Path]:
    def find(key: str) -> Path:
        try:
            return trace_path(key)
        except FileNotFoundError as exc:
            pytest.fail(f"{exc}; CI clones beside /work/shared, so ../shared/traces must exist ({ENV} overrides)")

    return find
