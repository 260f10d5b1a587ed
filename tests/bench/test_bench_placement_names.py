"""bench/bench_placement.py names its MiniClusters per run: local clusters are named per machine, so two runs at
once (or a run beside a test) made `placement-cm-g-dgemm` twice and one `up` failed or tore down the other's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT_NAMES = """
import sys, tempfile
from pathlib import Path
sys.path.insert(0, "bench")
import bench_placement as b
out = Path(tempfile.mkdtemp())
print(",".join(b.job_spec(s, k, "cpu", Path("/bin/true"), out).name for s in b.SCENARIOS for k in b.MIX))
"""


def _names() -> list[str]:
    run = subprocess.run([sys.executable, "-c", PRINT_NAMES], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip().split(",")


def test_two_runs_name_their_clusters_apart_and_each_name_is_a_hostname() -> None:
    first, second = _names(), _names()
    assert len(set(first)) == len(first)  # one cluster per scenario and kernel within a run
    assert not set(first) & set(second)  # and none shared with another run
    assert all(len(f"{name}-1") <= 63 and name.islower() for name in first)
