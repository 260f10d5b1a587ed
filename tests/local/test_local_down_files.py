"""`down` leaves no file of the run behind but the outputs `up` pointed to (issue 24): no lock file (the state
directory's, the controllers'), no temporary directory (the multiplexing controller's work directory), compared
by listing before `up` and after `down`."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from elasticity.workloads.proxy import build_proxy_solver


def _spec(directory: Path, name: str, **spec: Any) -> Path:
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 2,
            "tasks": 4,
            "interactive": True,
            "containers": [{"image": "local", "resources": {"requests": {"cpu": "1"}}}],
            **spec,
        },
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


def _temporary(name: str) -> set[Path]:
    """Entries of the temporary directory that carry the cluster's name (what a run of it may make there)."""
    return {p for p in Path(tempfile.gettempdir()).iterdir() if name in p.name}


def test_down_removes_the_run_s_lock_files_and_temporary_directories(
    mc: Callable[..., Any], machine: Any, waiter: Callable[..., Any]
) -> None:
    build_proxy_solver()
    name = "dfiles"
    spec = _spec(
        machine.state_dir,
        name,
        multiplexing={"enabled": True, "command": "proxy_solver 200000 2048 32 1,1,1,20", "max": 2},
    )
    state_before, temporary_before = _files(machine.state_dir), _temporary(name)
    up = mc("up", str(spec), timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr

    def workdir() -> str | None:
        shown = mc("status", name, "-o", "json")
        return (json.loads(shown.stdout).get("multiplexing") or {}).get("workdir") if shown.returncode == 0 else None

    made = waiter(workdir, timeout=90)
    assert made and Path(made).is_dir(), up.stdout  # the controller made a temporary work directory
    assert list(machine.state_dir.rglob("*.lock"))  # the store's and the controller's, while it runs

    down = mc("down", name, timeout=90)
    assert down.returncode == 0, down.stderr
    left = _files(machine.state_dir) - state_before
    outputs = {".multiplexer", *(f".multiplexer/{name}.{ext}" for ext in ("jsonl", "png", "log"))}
    assert left <= outputs | {f".multiplexer/local-{name}.json"}, sorted(left - outputs)  # no lock, no cluster
    assert not Path(made).exists()
    assert _temporary(name) - temporary_before == set()


def test_down_stops_the_autoscaler_and_removes_its_lock(
    mc: Callable[..., Any], machine: Any, waiter: Callable[..., Any]
) -> None:
    from miniclusters import pidlock

    name = "dauto"
    spec = _spec(machine.state_dir, name, maxSize=3, autoscale={"enabled": True})
    state_before = _files(machine.state_dir)
    up = mc("up", str(spec), "--detach", timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "autoscaler: pid" in up.stdout
    lock = machine.state_dir / ".autoscaler" / f"{name}.lock"
    log = lock.with_suffix(".log")
    assert waiter(lambda: pidlock.holder(lock), timeout=60), log.read_text() if log.exists() else "no log"
    down = mc("down", name, timeout=90)
    assert down.returncode == 0, down.stderr
    assert "stopped the autoscaler" in down.stdout
    left = _files(machine.state_dir) - state_before
    assert not [p for p in left if p.endswith(".lock") or p.startswith(f"{name}/")], sorted(left)
