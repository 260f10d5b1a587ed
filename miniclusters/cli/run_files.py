"""What a local run keeps outside its cluster directory, ended or removed by `down` (issue 24): the background
controllers `up` starts (and their lock files), and the multiplexing controller's work directory when it made a
temporary one. Their event logs, timelines and output logs stay: `up` told the user where to find them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from miniclusters import pidlock


def stop_controllers(name: str) -> list[str]:
    """Stop the cluster's multiplexing controller (it cancels its simulations first) and autoscaler; what to say."""
    from miniclusters.autoscaling.state import autoscale_dir
    from miniclusters.multiplex.background import stop

    said = []
    stopped = stop(name)
    if stopped is not None:
        said.append(f"stopped the multiplexing controller (pid {stopped})")
    stopped = pidlock.stop_holder(autoscale_dir() / f"{name}.lock")
    if stopped is not None:
        said.append(f"stopped the autoscaler (pid {stopped})")
    return said


def made_workdir(name: str, workdir: str | None) -> Path | None:
    """The multiplexing work directory when the controller made it (a temporary `mc-mux-<name>-*`), else None:
    one the user chose (--workdir, spec.multiplexing.workdir) is theirs to keep."""
    if not workdir:
        return None
    path = Path(workdir)
    if path.parent == Path(tempfile.gettempdir()) and path.name.startswith(f"mc-mux-{name}-") and path.is_dir():
        return path
    return None


def remove_run_files(name: str, backend: str) -> list[Path]:
    """After the cluster is deleted: the multiplexing controller's temporary work directory; what was removed."""
    from miniclusters.multiplex.state_file import load_state

    state = load_state(backend, name) or {}
    workdir = made_workdir(name, state.get("workdir"))
    if workdir is None:
        return []
    shutil.rmtree(workdir, ignore_errors=True)
    return [workdir]
