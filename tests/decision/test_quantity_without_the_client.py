"""Quantities parse in a pod whose broker bundle has no Kubernetes client (the client is one of its extras): from
the client's quantity.py copied beside our packages (images/broker/Dockerfile)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from elasticity.model import resources


def real_client_file() -> Path:
    spec = importlib.util.find_spec("kubernetes")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "utils" / "quantity.py"


CLIENT_QUANTITY = real_client_file()


@pytest.fixture
def no_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "kubernetes" else real(name, *a))
    monkeypatch.delitem(sys.modules, "kubernetes.utils.quantity", raising=False)
    resources._kubernetes_parse_quantity.cache_clear()
    yield
    resources._kubernetes_parse_quantity.cache_clear()


def test_the_copied_quantity_file_parses_as_the_client_does(
    no_client: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "BUNDLED_QUANTITY", tmp_path / "kubernetes_quantity.py")
    shutil.copy(CLIENT_QUANTITY, resources.BUNDLED_QUANTITY)
    assert resources.parse_quantity("500m") == Decimal("0.5")
    assert resources.cpu_millicores("2") == 2000


def test_without_the_client_or_its_file_the_error_says_what_to_install(
    no_client: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "BUNDLED_QUANTITY", tmp_path / "absent.py")
    with pytest.raises(ImportError, match="pip install kubernetes"):
        resources.parse_quantity("1")
