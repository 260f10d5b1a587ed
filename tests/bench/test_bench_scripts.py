"""Every bench/ script at least starts: `--help` exits 0. A script whose import broke (bench_flavours.py imported
helpers bench_rest.py no longer had) would otherwise be found only by the next person who needs its figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("script", sorted(BENCH.glob("bench_*.py")), ids=lambda p: p.name)
def test_bench_script_starts(script: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120, cwd=BENCH.parent
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "usage" in run.stdout.lower()
