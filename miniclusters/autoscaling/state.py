"""The autoscaling loop's state for `minicluster status`: running or stopped (and why), its size, its drains.

The loop rewrites `<state>/.autoscaler/<backend>-<name>.json` (atomically) at every step and once more when it
stops, saying why. A loop that was killed writes nothing more: whoever reads the file finds its process gone and
shows it stopped, so a dead loop never looks alive. The multiplexing controller's state is read the same way
(:func:`read_loop_state`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, TypedDict, cast

from common import atomic
from miniclusters.workdirs import state_root


class LoopState(TypedDict, total=False):
    """What every loop's state file says (the autoscaler's, the multiplexing controller's), as status reads it."""

    cluster: str
    running: bool
    stopped: str
    """Why it stopped (a loop found dead: its process is gone)."""
    updated: float
    started_by: str
    """up or cli."""
    last_event: dict[str, Any] | None  # open: the loop's last event line, its fields by kind


class StepNote(TypedDict, total=False):
    """What one step of the autoscaler adds to its state: the size its queue asks for and why, or why it stopped."""

    wanted: int | None
    reason: str
    stopped: str


class AutoscalerState(LoopState, StepNote, total=False):
    """The autoscaler's state file: its step, its pid and when it was written."""

    pid: int
    size: int | None
    draining: list[int]
    events: str


def autoscale_dir() -> Path:
    """The autoscalers' locks and states on this machine."""
    return state_root() / ".autoscaler"  # not a cluster name (names cannot start with a dot)


def state_file(backend: str, name: str) -> Path:
    return autoscale_dir() / f"{backend}-{name}.json"


def save_state(path: Path, fields: AutoscalerState) -> None:
    """Write the loop's state (with our pid and the time) so a reader never sees half of it. The folder is made
    by the loop's lock; when it is gone (the whole state directory was removed), nothing is written back."""
    if not path.parent.is_dir():
        return
    state: AutoscalerState = {"pid": os.getpid(), "updated": time.time(), **fields}
    atomic.write_json(path, state, default=str)


def load_state(backend: str, name: str) -> AutoscalerState | None:
    """The saved state; a loop that says it runs but whose process is gone (killed) is shown stopped."""
    return cast(AutoscalerState | None, read_loop_state(state_file(backend, name), pid_key="pid"))


def read_loop_state(path: Path, pid_key: str) -> LoopState | None:
    """A loop's state file (the autoscaler's, the multiplexing controller's); None when missing or unreadable.
    One that says it runs but whose process (``data[pid_key]``) is gone is shown stopped, saying so."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    state = cast(LoopState, data)  # the file as the loop wrote it: readers look before they trust a field
    pid = data.get(pid_key)
    if state.get("running") and isinstance(pid, int) and not alive(pid):
        state["running"] = False
        state["stopped"] = f"its process {pid} is gone (killed?)"
    return state


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
