"""How the multiplexing controller accounts for its simulations: each ends exactly once, as done, failed (with its
reason), cancelled or timeout; a controller that times out or is stopped says so for every simulation it leaves
and closes its event log; a simulation that failed because a pod was lost is resubmitted (bounded); the closing
table has the final iteration count. Pure: a simulated cluster, scripted Flux jobs and a virtual clock."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from elasticity.control.multiplex import MultiplexPlanner, all_done, summary_rows
from elasticity.control.multiplex_ports import Submitted
from elasticity.control.multiplex_runner import MultiplexRunner
from elasticity.control.multiplex_types import TERMINAL, MultiplexConfig, Profile, SimulationView
from elasticity.control.ports import ClusterView
from elasticity.figures.timeline import timeline_rows
from elasticity.model.node import Node
from elasticity.sim.cluster import SimulatedCluster

DUTY = (0.05, 0.05, 0.05, 0.95)
PLACEMENT = {0: (0, 1), 1: (2, 3)}


@dataclass
class Jobs:
    """Flux jobs as the lead reports them: 10 it/s each, profiled at 50 iterations, done at `length`. `fail`
    scripts attempts that fail: sim -> [(iteration it fails at, whether a pod was lost), ...] per attempt."""

    clock: list[float]
    length: int = 500
    fail: dict[str, list[tuple[int, bool]]] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    cancelled: dict[str, str] = field(default_factory=dict)

    def submit(self, sim: str, profile_iterations: int) -> Submitted:
        self.attempts[sim] = self.attempts.get(sim, 0) + 1
        self.started[sim] = self.clock[0]
        return Submitted(True, job_id=f"f{sim}.{self.attempts[sim]}")

    def observe(self) -> Mapping[str, SimulationView]:
        out = {}
        for sim, t0 in self.started.items():
            it = int((self.clock[0] - t0) * 10)
            script = self.fail.get(sim, [])
            attempt = self.attempts[sim] - 1
            failing = script[attempt] if attempt < len(script) else None
            if sim in self.cancelled:
                out[sim] = SimulationView(sim, "cancelled", None, reason="CANCELED")
            elif failing is not None and it >= failing[0]:
                why = f"flux job f{sim}: FAILED rc=1; error: ORTE lost a daemon"
                out[sim] = SimulationView(sim, "failed", failing[0], reason=why, lost=failing[1])
            elif it >= self.length:
                out[sim] = SimulationView(sim, "done", self.length)
            else:
                out[sim] = SimulationView(sim, "running", it, Profile(DUTY, PLACEMENT) if it >= 50 else None)
        return out

    def cancel(self, sim: str, reason: str) -> None:
        self.cancelled[sim] = reason


class Restarting:
    """The cluster's observer, with pod restarts counted from `restarts` (a follower killed and restarted)."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.restarts = 0

    def observe(self, name: str) -> ClusterView:
        view = self.cluster.observe(name)
        pods = tuple(dataclasses.replace(p, restarts=self.restarts if p.index == 1 else 0) for p in view.pods)
        return dataclasses.replace(view, pods=pods)


class Log:
    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []

    def write(self, kind: str, cluster: str = "", **fields: object) -> dict[str, object]:
        self.records.append({"kind": kind, **fields})
        return self.records[-1]


def setup(jobs_length: int = 500, **overrides: object) -> tuple[MultiplexRunner, Jobs, Restarting, list[float], Log]:
    clock = [0.0]
    cluster = SimulatedCluster([Node("n1", 4000)], clock=lambda: clock[0])
    cluster.create("mux", size=2, max_size=2, cpu_per_pod=1000)
    options: dict[str, object] = dict(
        ranks=4, pods=(0, 1), cores_per_node=4, nodes=1, max_simulations=2, equal_per_rank_m=500, headroom=1.0,
        settle_time=1.0, fairness_interval=2.0, start_timeout=10.0, failure_grace=3.0, max_retries=1,
    )  # fmt: skip
    options.update(overrides)
    jobs = Jobs(clock, jobs_length)
    observer = Restarting(cluster)
    log = Log()
    runner = MultiplexRunner(
        "mux", MultiplexPlanner(MultiplexConfig(**options)), observer, cluster, jobs,  # type: ignore[arg-type]
        clock=lambda: clock[0], log=log,  # type: ignore[arg-type]
    )  # fmt: skip
    return runner, jobs, observer, clock, log


def tick(clock: list[float]) -> object:
    return lambda dt: clock.__setitem__(0, clock[0] + dt)


def run(runner: MultiplexRunner, clock: list[float], seconds: float) -> None:
    end = clock[0] + seconds
    while clock[0] < end and runner.planner.phase != "done":
        runner.step()
        clock[0] += 0.5


def ends(log: Log) -> dict[str, list[str]]:
    """sim -> the terminal events logged for it (exactly one each, in a sound log)."""
    out: dict[str, list[str]] = {}
    for record in log.records:
        if "sim" in record:
            out.setdefault(str(record["sim"]), [])
            if record["kind"] in TERMINAL:
                out[str(record["sim"])].append(str(record["kind"]))
    return out


def test_a_timed_out_controller_ends_what_runs_as_timeout_not_running() -> None:
    runner, jobs, _, clock, log = setup(jobs_length=10_000)
    runner.run(interval=0.5, sleep=tick(clock), timeout=20)  # type: ignore[arg-type]
    states = {row["sim"]: row["state"] for row in summary_rows(runner.planner)}
    assert states == {"sim1": "timeout", "sim2": "timeout"}, states
    assert sorted(jobs.cancelled) == ["sim1", "sim2"]
    assert ends(log) == {"sim1": ["timeout"], "sim2": ["timeout"]}
    assert log.records[-1]["kind"] == "controller-stop" and log.records[-1]["state"] == "timeout"
    assert not all_done(runner.planner), "the exit code is non-zero"
    # the lead later reports the jobs CANCELED: that changes nothing (one end per simulation)
    run(runner, clock, 2)
    assert ends(log) == {"sim1": ["timeout"], "sim2": ["timeout"]}


def test_down_mid_run_records_a_cancel_for_each_simulation_and_a_closed_timeline() -> None:
    runner, jobs, _, clock, log = setup(jobs_length=10_000)
    asked: list[str] = []

    def sleep(dt: float) -> None:
        clock[0] += dt
        if clock[0] > 25:
            asked.append("the controller was stopped (SIGTERM)")

    runner.run(interval=0.5, sleep=sleep, stopping=lambda: asked[0] if asked else None)
    rows = summary_rows(runner.planner)
    assert [r["state"] for r in rows] == ["cancelled", "cancelled"] and all("SIGTERM" in r["reason"] for r in rows)
    assert sorted(jobs.cancelled) == ["sim1", "sim2"]
    assert ends(log) == {"sim1": ["cancelled"], "sim2": ["cancelled"]}
    last = log.records[-1]
    assert last["kind"] == "controller-stop" and last["cancelled"] == ["sim1", "sim2"]
    timeline = timeline_rows({**r, "t": i} for i, r in enumerate(log.records))
    assert all(row["end"] is not None and row["end_kind"] == "cancelled" for row in timeline.values())


def test_a_simulation_that_failed_because_a_pod_was_lost_is_resubmitted_then_done() -> None:
    runner, jobs, _, clock, log = setup(jobs_length=300, max_simulations=1)
    jobs.fail["sim1"] = [(120, True)]  # the first attempt dies with its follower (node-failure)
    run(runner, clock, 120)
    assert jobs.attempts["sim1"] == 2
    rec = runner.planner.sims["sim1"]
    assert rec.state == "done" and rec.retries == 1 and rec.iterations == 300
    assert [r["kind"] for r in log.records if r.get("sim") == "sim1"].count("retry") == 1
    assert ends(log)["sim1"] == ["done"] and all_done(runner.planner)


def test_a_failure_followed_by_a_pod_restart_counts_as_lost_and_retries_are_bounded() -> None:
    runner, jobs, observer, clock, log = setup(jobs_length=300, max_simulations=1, max_retries=1)
    jobs.fail["sim1"] = [(120, False), (80, False)]  # the job fails first; the pod's restart shows a moment later
    while "sim1" not in runner.planner.sims or jobs.attempts.get("sim1", 0) < 1 or clock[0] < 13:
        runner.step()
        clock[0] += 0.5
    runner.step()  # the failure is seen; no sign of a lost pod yet: it waits (failure_grace)
    assert runner.planner.sims["sim1"].state == "running" and jobs.attempts["sim1"] == 1
    observer.restarts = 1  # the killed follower's pod restarted
    clock[0] += 1
    runner.step()
    assert jobs.attempts["sim1"] == 2, "resubmitted"
    observer.restarts = 2  # killed again: but only one retry is allowed
    run(runner, clock, 60)
    rec = runner.planner.sims["sim1"]
    assert rec.state == "failed" and jobs.attempts["sim1"] == 2
    assert "ORTE lost a daemon" in rec.reason and "given up after 1 retries" in rec.reason
    assert ends(log)["sim1"] == ["failed"] and not all_done(runner.planner)


def test_a_plain_failure_is_not_retried_and_keeps_its_error() -> None:
    runner, jobs, _, clock, _log = setup(jobs_length=300, max_simulations=1, total_simulations=1)
    jobs.fail["sim1"] = [(60, False)]
    run(runner, clock, 60)
    rows = summary_rows(runner.planner)
    assert [(r["state"], r["retries"], r["iterations"]) for r in rows] == [("failed", 0, 60)]
    assert rows[0]["reason"] == "flux job fsim1: FAILED rc=1; error: ORTE lost a daemon"
    assert runner.planner.phase == "done" and not all_done(runner.planner)


def test_the_closing_table_has_the_final_iteration_count() -> None:
    runner, _jobs, _, clock, _ = setup(jobs_length=437, max_simulations=1, total_simulations=1)
    run(runner, clock, 120)
    (row,) = summary_rows(runner.planner)
    assert row["state"] == "done" and row["iterations"] == 437, row


def test_a_simulation_whose_pods_never_start_ends_cancelled_once() -> None:
    runner, jobs, _, clock, log = setup(max_simulations=1, total_simulations=1)
    jobs.started.clear()
    jobs.submit = lambda sim, profile_iterations: Submitted(True, job_id="never")  # type: ignore[method-assign]
    jobs.observe = lambda: {"sim1": SimulationView("sim1", "pending")}  # type: ignore[method-assign]
    run(runner, clock, 30)
    (row,) = summary_rows(runner.planner)
    assert row["state"] == "cancelled" and "partial deployment" in row["reason"]
    assert ends(log) == {"sim1": ["cancelled"]}
