"""The multiplexing planner writes its own event log: the runner reports what the world answered through the
planner's methods and never appends to `planner.events` itself."""

from __future__ import annotations

import ast
from pathlib import Path

from elasticity.control.multiplex import MultiplexPlanner
from elasticity.control.multiplex_ports import SharesResult
from elasticity.control.multiplex_types import MultiplexConfig, Observation, StartSimulation

ROOT = Path(__file__).resolve().parents[2]


def started() -> tuple[MultiplexPlanner, str]:
    """A planner that has just decided to start its first simulation."""
    p = MultiplexPlanner(MultiplexConfig(ranks=2, pods=(0,), cores_per_node=2, nodes=1, max_simulations=2))
    (start,) = [a for a in p.decide(Observation(0.0, {}, {0: 1000}, 2000, 0)) if isinstance(a, StartSimulation)]
    return p, start.sim


def test_answers_become_planner_events() -> None:
    p, sim = started()
    p.simulation_started(sim, 1.25, True, job_id="f2")
    p.shares_answered(2.0, "job", [SharesResult(0, True, "sim1=300m"), SharesResult(1, False, "no delegation")])
    p.cancel_failed(3.0, sim, "broker unreachable")
    tail = p.events[-4:]
    assert tail == [
        {"t": 1.25, "event": "submitted", "sim": sim, "job": "f2"},
        {"t": 2.0, "event": "job-shares", "pod": 0, "applied": True, "detail": "sim1=300m", "level": "job"},
        {"t": 2.0, "event": "job-shares", "pod": 1, "applied": False, "detail": "no delegation", "level": "job"},
        {"t": 3.0, "event": "cancel-failed", "sim": sim, "reason": "broker unreachable"},
    ]


def test_a_refused_submission_ends_the_simulation_without_a_submitted_event() -> None:
    p, sim = started()
    p.simulation_started(sim, 1.0, False, "queue disabled")
    assert p.sims[sim].state == "failed"
    assert not any(e["event"] == "submitted" for e in p.events)


def test_nothing_outside_the_planner_appends_to_its_events() -> None:
    offenders = []
    for folder in ("elasticity", "miniclusters", "broker"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "elasticity/control/multiplex.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("append", "extend", "insert")
                    and ast.unparse(node.func.value).endswith("planner.events")
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
