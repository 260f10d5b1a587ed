"""The multiplexing loop on the Kubernetes backend against the fake API server: resizes through the `resize`
subresource, Deferred and Infeasible answers from the kubelet, and a simulation whose pods never start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from elasticity.control.multiplex import MultiplexPlanner
from elasticity.control.multiplex_ports import Submitted
from elasticity.control.multiplex_runner import MultiplexRunner
from elasticity.control.multiplex_types import MultiplexConfig, Profile, SimulationView
from elasticity.model.resources import cpu_millicores
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.ports import ports_for
from miniclusters.testing.fake_kube import FakeKube

DUTY = (0.05, 0.05, 0.05, 0.95)
PLACEMENT = {0: (0, 1), 1: (2, 3)}


@dataclass
class ScriptedSimulations:
    """Flux jobs as the lead would report them: running at 10 it/s and profiled after 50 iterations, unless
    the test says a simulation's pods never start (it then stays pending)."""

    clock: object
    never_start: set[str] = field(default_factory=set)
    started: dict[str, float] = field(default_factory=dict)
    cancelled: dict[str, str] = field(default_factory=dict)

    def submit(self, sim: str, profile_iterations: int) -> Submitted:
        self.started[sim] = self.clock()  # type: ignore[operator]
        return Submitted(True, job_id=f"f{sim}")

    def observe(self) -> Mapping[str, SimulationView]:
        now = self.clock()  # type: ignore[operator]
        out = {}
        for sim, t0 in self.started.items():
            if sim in self.cancelled:
                out[sim] = SimulationView(sim, "failed", reason="cancelled")
            elif sim in self.never_start:
                out[sim] = SimulationView(sim, "pending")
            else:
                it = int((now - t0) * 10)
                out[sim] = SimulationView(sim, "running", it, Profile(DUTY, PLACEMENT) if it >= 50 else None)
        return out

    def cancel(self, sim: str, reason: str) -> None:
        self.cancelled[sim] = reason


def make_runner(backend: KubernetesBackend, clock, sims: ScriptedSimulations, **config: object) -> MultiplexRunner:
    options: dict[str, object] = dict(
        ranks=4, pods=(0, 1), cores_per_node=1, nodes=2, max_simulations=3, equal_per_rank_m=450,
        headroom=1.0, settle_time=1.0, fairness_interval=2.0, start_timeout=10.0, pod_overhead_m=100,
    )  # fmt: skip
    options.update(config)
    cfg = MultiplexConfig(**options)  # type: ignore[arg-type]
    observer, actuator = ports_for(backend)  # allocatable: 1 core x 2 nodes (the view names no nodes)
    return MultiplexRunner("demo", MultiplexPlanner(cfg), observer, actuator, sims, clock=clock)


def run(runner: MultiplexRunner, clock, seconds: float) -> None:
    end = clock.now + seconds
    while clock.now < end:
        runner.step()
        clock.advance(0.5)


def resize_patches(fake: FakeKube) -> list[tuple[str | None, object]]:
    return [(c.name, c.body) for c in fake.calls if c.subresource == "resize" and c.verb == "patch"]


def cpu_requests(fake: FakeKube) -> dict[int, str]:
    return {i: p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for i, p in fake.pods_of("demo").items()}


def test_profile_resize_and_pack_through_the_resize_subresource(backend, fake: FakeKube, clock, make_mc) -> None:
    fake.node_cpu = "4"
    backend.create(make_mc(size=2))
    uids = {i: p["metadata"]["uid"] for i, p in fake.pods_of("demo").items()}
    sims = ScriptedSimulations(clock)
    # each keeps 1.1 of the 2 cores busy: at the default 85% the model's knee would stop at N = 2
    runner = make_runner(backend, clock, sims, efficiency_threshold=0.6)
    run(runner, clock, 40)
    assert sorted(sims.started) == ["sim1", "sim2", "sim3"]
    # 3 x (pod 0: 2 x 0.05 x 450m; pod 1: 0.05 x 450m + 0.95 x 450m) + 100m broker overhead per pod
    assert cpu_requests(fake) == {0: "235m", 1: "1450m"}
    patches = resize_patches(fake)
    assert patches and all(name.startswith("demo-") for name, _ in patches)  # type: ignore[union-attr]
    # in place: same pods, no restarts
    assert {i: p["metadata"]["uid"] for i, p in fake.pods_of("demo").items()} == uids
    assert runner.planner.restarts == 0
    assert all(s["restartCount"] == 0 for p in fake.pods_of("demo").values() for s in p["status"]["containerStatuses"])


def test_deferred_resize_backs_off_and_nothing_more_is_deployed(backend, fake: FakeKube, clock, make_mc) -> None:
    backend.create(make_mc(size=2))
    sims = ScriptedSimulations(clock)
    runner = make_runner(backend, clock, sims)
    # until sim1 is profiled and resized down (shrinking always fits), with sim2 packed in the same step
    start = clock()
    while "sim1" not in runner.planner.sims or not runner.planner.sims["sim1"].profiled:
        run(runner, clock, 0.5)
        assert clock() < start + 60, "sim1 never profiled"
    assert list(sims.started) == ["sim1", "sim2"]
    fake.kubelet = "defer"
    runner.planner.sims["sim1"].demand = runner.planner.sims["sim1"].demand.__class__("sim1", {0: 400.0, 1: 900.0})
    before = len(resize_patches(fake))
    run(runner, clock, 30)
    deferred = [e for e in runner.planner.events if e["event"] == "resize-deferred"]
    assert len(deferred) >= 3
    waits = [e["retry_in"] for e in deferred]
    assert waits[:3] == [1.0, 2.0, 4.0]  # exponential back-off
    assert any("Node didn't have enough resource" in e.get("reason", "") for e in runner.planner.events)
    assert list(sims.started) == ["sim1", "sim2"]  # the plan was not grown by another simulation
    retried = len(resize_patches(fake)) - before  # both pods, each retried at t+1, +2, +4, +8, +16 s
    assert retried == 2 * len(deferred) <= 12  # with back-off, not every 0.5 s step
    fake.kubelet = "auto"
    fake.run_controllers()
    run(runner, clock, 20)
    # the kubelet admits it now: the pod runs with the request, and packing may resume
    status = backend.status("demo").pod(1)
    assert status is not None and cpu_millicores(status.cpu_actual or "0") >= 1000


def test_infeasible_resize_is_not_retried_and_stops_packing(backend, fake: FakeKube, clock, make_mc) -> None:
    fake.node_cpu = "1"  # a pod can never get more than 1 CPU here
    backend.create(make_mc(size=2))
    sims = ScriptedSimulations(clock)
    runner = make_runner(backend, clock, sims, equal_per_rank_m=1000)  # equal: 2 x 1000m + 100m per pod
    run(runner, clock, 30)
    answers = [e for e in runner.planner.events if e["event"] == "resize-answer" and e["answer"] == "infeasible"]
    assert answers and "capacity" in answers[0]["reason"]
    assert runner.planner.blocked is not None
    infeasible_patches = [b for n, b in resize_patches(fake) if "2100m" in str(b)]
    assert len(infeasible_patches) == 2  # asked once per pod, never again
    assert list(sims.started) == ["sim1"]


def test_simulation_whose_pods_never_start_is_cancelled_and_its_cpu_returned(
    backend, fake: FakeKube, clock, make_mc
) -> None:
    fake.node_cpu = "4"
    backend.create(make_mc(size=2))
    sims = ScriptedSimulations(clock, never_start={"sim2"})
    runner = make_runner(backend, clock, sims, max_simulations=2, total_simulations=2)
    run(runner, clock, 15)
    assert "sim2" in sims.started
    with_sim2 = cpu_requests(fake)
    run(runner, clock, 20)
    assert "partial deployment" in sims.cancelled["sim2"]
    # its estimated CPU went back: only sim1's needs (plus the overheads) are requested now
    assert cpu_requests(fake) == {0: "145m", 1: "550m"}
    assert with_sim2 != cpu_requests(fake)
