"""The architecture contract (pyproject.toml [tool.importlinter]) holds, so pytest alone also catches a change
that breaks the layering: elasticity imports neither broker nor miniclusters, the layers point down, no circles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    for contract in ("elasticity imports neither the broker nor miniclusters", "no import circles"):
        assert f"{contract}" in result.stdout
