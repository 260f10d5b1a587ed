"""Where the multiplexing controller's state lives and how `minicluster status` reads it, without importing the
planner (status reads this on every call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from miniclusters.autoscaling.state import read_loop_state
from miniclusters.workdirs import state_root


def state_file(backend: str, name: str) -> Path:
    """Where the controller's state for `minicluster status` lives."""
    return state_root() / ".multiplexer" / f"{backend}-{name}.json"  # no cluster is called ".multiplexer"


def load_state(backend: str, name: str) -> dict[str, Any] | None:
    """The saved state; a controller that says it runs but whose process is gone (killed) is shown stopped."""
    return read_loop_state(state_file(backend, name), pid_key="controller_pid")
