"""common/atomic.py: the one temp-file-and-rename helper, and no hand-written copies left beside it."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

from common import atomic

ROOT = Path(__file__).resolve().parents[2]
# Renames left, and why: the helper itself; elasticity may not import the broker (import-linter), so its compiler
# output keeps its own mkstemp + rename; the pod supervisor runs with the standard library only (python -I -S).
ALLOWED = {
    "common/atomic.py": 1,
    "elasticity/pmpi/build.py": 1,
    "miniclusters/backends/local/supervisor.py": 1,
    # job directories, no file written: a finished job's tmpdir renamed to a spare, a spare renamed to the next
    # job's, or a used one renamed aside for its removal
    "broker/modules/job_dirs.py": 3,
}


def test_a_reader_sees_the_old_file_or_the_new_one_never_half(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    versions = {str(i) * 200_000 for i in range(10)}
    atomic.write_text(target, "0" * 200_000)
    torn: list[int] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            text = target.read_text()
            if text not in versions:
                torn.append(len(text))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(20):
            for i in range(10):
                atomic.write_text(target, str(i) * 200_000)
    finally:
        done.set()
        reader.join()
    assert torn == []
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary left behind


def test_a_failed_write_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "minicluster.json"
    atomic.write_json(target, {"size": 2})
    with pytest.raises(RuntimeError), atomic.replacing(target) as temporary:
        temporary.write_text('{"size": ')
        raise RuntimeError("interrupted")
    assert target.read_text() == '{\n  "size": 2\n}'
    assert [p.name for p in tmp_path.iterdir()] == ["minicluster.json"]


def test_modes_and_durable_writes(tmp_path: Path) -> None:
    private = tmp_path / "private"
    atomic.write_bytes(private, b"secret", mode=0o600, fsync=True)
    assert private.read_bytes() == b"secret" and private.stat().st_mode & 0o777 == 0o600
    umask = os.umask(0o022)
    os.umask(umask)
    atomic.write_text(tmp_path / "public", "x")
    assert (tmp_path / "public").stat().st_mode & 0o777 == 0o666 & ~umask


def _renames(tree: ast.AST) -> list[int]:
    """Lines that rename a file: os.replace/os.rename, or path.replace/rename(...) on a temporary."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = ast.unparse(node.func.value)
        if node.func.attr in ("replace", "rename") and (
            owner == "os" or (len(node.args) == 1 and not node.keywords and ("tmp" in owner or "temp" in owner))
        ):
            found.append(node.lineno)
    return found


def test_no_hand_written_temp_file_and_rename_is_left() -> None:
    copies = []
    for package in ("broker", "miniclusters", "elasticity", "bursting"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            lines = _renames(ast.parse(path.read_text()))
            if len(lines) > ALLOWED.get(name, 0):
                copies += [f"{name}:{line}" for line in lines]
    assert copies == []


def test_the_scan_finds_a_copy() -> None:
    source = "import os\ntmp.write_text('x')\ntmp.replace(path)\nos.replace(a, b)\n'a-b'.replace('-', '_')\n"
    assert _renames(ast.parse(source)) == [3, 4]
