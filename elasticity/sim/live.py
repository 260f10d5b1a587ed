"""The bridge between a simulated workload and the live malleable loop (elasticity/control/malleable.py): the
same jobs handed to the loop, and the loop's run reported as the simulator reports one (table, metrics, figure).
"""

from __future__ import annotations

from elasticity.control.malleable import LiveJob, MalleableLoop
from elasticity.sim.engine import JobRecord, SimResult
from elasticity.sim.workload import Workload


def live_jobs(workload: Workload) -> tuple[LiveJob, ...]:
    """The workload's jobs as the loop submits them, named j01, j02, ... in workload order."""
    width = max(2, len(str(len(workload.jobs))))
    return tuple(
        LiveJob(index, f"j{spec.job:0{width}d}", spec.submit, spec.size, spec.runtime, spec.estimate, spec.priority,
                spec.model)
        for index, spec in enumerate(workload.jobs)
    )  # fmt: skip


def live_result(loop: MalleableLoop, workload: Workload) -> SimResult:
    """The live run as a SimResult: the records the simulator would have written for it."""
    records = tuple(
        JobRecord(
            workload.jobs[state.job.index].job, state.job.submit, state.start, state.end, state.nodes or state.final,
            state.job.size.pref, state.job.priority, state.node_seconds, state.expands, state.shrinks,
            state.job.size.malleable,
        )
        for state in loop.states.values()
    )  # fmt: skip
    return SimResult(workload.name, loop.policy_name, loop.nodes, records, tuple(loop.busy), workload.notes)
