"""The development install: one plain path entry (no import hook on the CLI's start-up) and not one warning."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_editable_install_is_a_plain_path_and_warns_nothing(tmp_path: Path) -> None:
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["build-backend"]
    importlib.import_module(backend)  # the dev extra installs it, so this runs without the network
    program = f"import {backend} as b, sys; print(b.build_editable(sys.argv[1]))"
    proc = subprocess.run(
        [sys.executable, "-W", "default", "-c", program, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "deprecat" not in proc.stderr.lower(), proc.stderr
    wheel = tmp_path / proc.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        pth = [name for name in archive.namelist() if name.endswith(".pth")]
        assert len(pth) == 1, archive.namelist()
        lines = archive.read(pth[0]).decode().split()
        assert not [n for n in archive.namelist() if n.endswith(".py")]  # no finder module
    assert set(lines) == {str(ROOT)}  # `import` lines in a .pth would run on every interpreter start-up
