"""A real instance whose lead broker starts the real REST server (uvicorn), once per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.rest.testing import Server, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from start_server(tmp_path_factory.mktemp("rest"))
