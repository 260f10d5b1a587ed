"""Fixtures for broker tests (helpers live in broker/testing.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.testing import Instance, render_instance


@pytest.fixture
def make_instance(tmp_path: Path) -> Iterator[Callable[..., Instance]]:
    made: list[Instance] = []

    def make(size: int, **kwargs: object) -> Instance:
        root = tmp_path / f"i{len(made)}"
        root.mkdir()
        inst = render_instance(root, size, **kwargs)  # type: ignore[arg-type]
        made.append(inst)
        return inst

    yield make
    for inst in made:
        inst.cleanup()
