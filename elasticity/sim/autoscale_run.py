"""Drive the autoscaler against a simulated queue on a virtual clock (tests and dry runs on any backend).

The cluster side is whatever Observer/Actuator is given: the simulated cluster, or a real backend (the
Kubernetes backend over the API fake). The queue is :class:`elasticity.sim.queue.SimulatedQueue`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from elasticity.control.autoscale import Autoscaler
from elasticity.control.events import EventLog, read_events
from elasticity.control.ports import Actuator, Observer
from elasticity.policy.autoscale import AutoscaleOptions
from elasticity.sim.queue import SimulatedQueue


def random_jobs(count: int, max_nodes: int, seed: int) -> list[tuple[int, float]]:
    """(nodes in 1..max_nodes, 30-90 s) per job."""
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(1, max_nodes + 1)), float(rng.integers(30, 91))) for _ in range(count)]


def run_autoscale_scenario(
    observer: Observer,
    actuator: Actuator,
    name: str,
    jobs: Sequence[tuple[int, float]],
    options: AutoscaleOptions,
    log_path: Path,
    *,
    submit_every: float = 5.0,
    step: float = 5.0,
    duration: float = 2000.0,
    clock: list[float] | None = None,
) -> tuple[SimulatedQueue, list[dict[str, Any]]]:  # open: the event log's records
    """Submit ``jobs`` one every ``submit_every`` s, step the loop every ``step`` s for ``duration`` s."""
    now = clock if clock is not None else [0.0]
    queue = SimulatedQueue(observer, name)
    with EventLog(log_path, "autoscale", lambda: now[0]) as log:
        scaler = Autoscaler(name, observer, actuator, queue, options, clock=lambda: now[0], log=log)
        for tick in range(int(duration / step) + 1):
            now[0] = tick * step
            while len(queue.jobs) < len(jobs) and len(queue.jobs) * submit_every <= now[0]:
                nodes, seconds = jobs[len(queue.jobs)]
                queue.submit(len(queue.jobs) + 1, nodes, seconds)
            queue.advance(now[0])
            scaler.step()
            queue.advance(now[0])
    return queue, list(read_events(log_path))
