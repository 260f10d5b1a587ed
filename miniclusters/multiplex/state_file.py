"""Where the multiplexing controller's state lives and how `minicluster status` reads it, without importing the
planner (status reads this on every call)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from miniclusters.autoscaling.state import LoopState, read_loop_state
from miniclusters.workdirs import state_root

if TYPE_CHECKING:  # the planner's module is heavy; status reads this file on every call
    from elasticity.control.multiplex import SummaryRow


def state_file(backend: str, name: str) -> Path:
    """Where the controller's state for `minicluster status` lives."""
    return state_root() / ".multiplexer" / f"{backend}-{name}.json"  # no cluster is called ".multiplexer"


class MultiplexState(LoopState, total=False):
    """The multiplexing controller's state file (multiplex/session.py's save_state)."""

    controller_pid: int
    phase: str
    simulations: list[SummaryRow]
    requested_m: int | None
    resizes: int
    restarts: int
    beta: float | None
    blocked: str | None
    job_shares: str
    workdir: str
    same_pids: bool


def load_state(backend: str, name: str) -> MultiplexState | None:
    """The saved state; a controller that says it runs but whose process is gone (killed) is shown stopped."""
    return cast(MultiplexState | None, read_loop_state(state_file(backend, name), pid_key="controller_pid"))
