"""The pages' templates and static files ship in the wheel (an install without the checkout serves them)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "broker" / "rest" / "web"


def test_the_wheel_carries_every_template_and_static_file(tmp_path: Path) -> None:
    program = "import hatchling.build as b, sys; print(b.build_wheel(sys.argv[1]))"
    proc = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(tmp_path / proc.stdout.strip().splitlines()[-1]) as archive:
        names = set(archive.namelist())
    assets = [p for p in WEB.rglob("*") if p.is_file() and p.suffix in (".html", ".css", ".js")]
    assert {"style.css", "live.js", "base.html", "cluster.html"} <= {p.name for p in assets}
    missing = [str(p.relative_to(ROOT)) for p in assets if str(p.relative_to(ROOT)) not in names]
    assert not missing, missing
