"""The operator runs the multiplexing controller of every ready MiniCluster whose spec.multiplexing.enabled is
true, against the API fake: the same planner and runner as `minicluster multiplex`, resizing through the pods'
`resize` subresource; each notable step shows as an Event, the phase as the Multiplexing condition, and the
event log is appended to the lead's REST state directory through exec. Disabling or deleting stops it."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.jobs.jobid import encode_f58
from elasticity.control.multiplex_ports import Submitted
from elasticity.control.multiplex_types import Profile, SimulationView
from miniclusters.backends.base import ExecResult
from miniclusters.backends.kubernetes.api import MINICLUSTER
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.kubernetes.objects import custom_resource
from miniclusters.cli.status_view import render_status_text, status_document
from miniclusters.kube_shapes import Pod
from miniclusters.multiplex.event_mirror import ExecMirror
from miniclusters.multiplex.kube_loop import kubernetes_multiplex_starter
from miniclusters.operator.conditions import find
from miniclusters.operator.controller import Controller
from miniclusters.operator.loop_types import ClusterKey
from miniclusters.operator.multiplex_progress import RunRecord
from miniclusters.testing.fake_exec import default_exec
from miniclusters.testing.fake_kube import FakeKube
from tests.kubernetes.recorded_events import recorded_events
from tests.waiting import wait_until

KEY = ClusterKey(MINICLUSTER.api_version, "hpc", "demo")
MUX = {"enabled": True, "command": "proxy_solver 500 2048 32 1,1,1,20", "max": 2, "total": 2}
DUTY = (0.05, 0.05, 0.05, 0.95)
PLACEMENT = {0: (0, 1), 1: (2, 3)}


@dataclass
class ScriptedSimulations:
    """Flux jobs as the lead reports them: 10 it/s, profiled after 50 iterations, done after 500."""

    clock: Any
    started: dict[str, float] = field(default_factory=dict)
    cancelled: dict[str, str] = field(default_factory=dict)

    def submit(self, sim: str, profile_iterations: int) -> Submitted:
        self.started[sim] = self.clock()
        return Submitted(True, job_id=f"f{sim}")

    def observe(self) -> Mapping[str, SimulationView]:
        out = {}
        for sim, t0 in self.started.items():
            it = min(500, int((self.clock() - t0) * 10))
            if sim in self.cancelled:
                out[sim] = SimulationView(sim, "failed", it, reason="cancelled")
            else:
                state = "done" if it >= 500 else "running"
                out[sim] = SimulationView(sim, state, it, Profile(DUTY, PLACEMENT) if it >= 50 else None)  # type: ignore[arg-type]
        return out

    def cancel(self, sim: str, reason: str) -> None:
        self.cancelled[sim] = reason


class Lead:
    """The lead pod's exec answers, remembering what the controller appended to its event log."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def __call__(self, fake: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        if argv[:3] == ["sh", "-c", ExecMirror.SCRIPT]:
            path, text = argv[4], argv[5]
            self.files[path] = self.files.get(path, "") + text
            return ExecResult(0, "", "")
        return default_exec(fake, pod, argv)


@pytest.fixture
def lead(fake: FakeKube) -> Lead:
    answers = Lead()
    fake.exec_handler = answers
    return answers


@pytest.fixture
def sims(clock) -> list[ScriptedSimulations]:
    return []


@pytest.fixture
def operator(fake: FakeKube, clock, tmp_path: Path, sims: list[ScriptedSimulations]) -> Controller:
    def scripted(*_: Any) -> ScriptedSimulations:
        sims.append(ScriptedSimulations(clock))
        return sims[-1]

    def backend_for(namespace: str) -> KubernetesBackend:
        return KubernetesBackend(api=fake, namespace=namespace, clock=clock, sleep=clock.sleep, resize_wait=5.0)

    start = kubernetes_multiplex_starter(fake, scripted, tmp_path, backend_for)
    return Controller(fake, namespace="hpc", clock=clock, wall=clock.wall, multiplex_start=start)


def backend_for_status(fake: FakeKube, clock) -> KubernetesBackend:
    return KubernetesBackend(api=fake, namespace="hpc", clock=clock, sleep=clock.sleep)


def _settle(operator: Controller, clock) -> None:
    operator.run_until_idle(advance=clock.advance)


def _tick(operator: Controller, clock, seconds: float = 2.0) -> int:
    clock.advance(seconds)
    assert operator.multiplexers is not None
    stepped = operator.multiplexers.step_due()
    _settle(operator, clock)
    return stepped


def _condition(fake: FakeKube) -> tuple[str, str, str]:
    condition = find(fake.stored(MINICLUSTER, "demo")["status"]["conditions"], "Multiplexing")
    assert condition is not None
    return condition["status"], condition["reason"], condition["message"]


def _reasons(fake: FakeKube) -> list[str]:
    return [e["reason"] for e in recorded_events(fake) if e["action"] == "Multiplex"]


def _resizes(fake: FakeKube) -> int:
    return sum(1 for c in fake.calls if c.subresource == "resize" and c.verb == "patch")


def test_the_operator_runs_the_controller_of_an_enabled_cluster(
    fake: FakeKube, operator: Controller, clock, make_mc, lead: Lead, sims: list[ScriptedSimulations]
) -> None:
    fake.node_cpu = "4"
    fake.create(custom_resource(make_mc(size=2, tasks=4, multiplexing=MUX), "hpc"))
    operator.start()
    _settle(operator, clock)
    assert operator.multiplexers is not None and KEY in operator.multiplexers.loops
    status, reason, message = _condition(fake)
    assert (status, reason) == ("True", "Started") and "4 ranks on 2 pods, up to 2 at once" in message
    assert "budget 2000m" in message and _reasons(fake) == ["Started"]

    for _ in range(40):
        _tick(operator, clock)
        if len(sims[0].started) == 2:
            break
    (scripted,) = sims
    assert sorted(scripted.started) == ["sim1", "sim2"], "profiled, resized, and a second simulation packed"
    assert _resizes(fake) >= 2, "pods resized through the resize subresource"
    requests = {
        i: p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for i, p in fake.pods_of("demo", "hpc").items()
    }
    assert requests != {0: "1", 1: "1"}, requests
    reasons = _reasons(fake)
    assert reasons.index("SimulationStarted") < reasons.index("Profiled") < reasons.index("Resized")
    assert reasons.count("SimulationStarted") == 2
    assert "last event: submitted" in _condition(fake)[2] and "sim2" in _condition(fake)[2]
    _tick(operator, clock)
    status, reason, message = _condition(fake)
    assert status == "True" and "2 running" in message and "last event: " in message, message
    # `minicluster status --backend kubernetes` shows it among the conditions
    text = render_status_text(status_document(backend_for_status(fake, clock).status("demo")))
    assert "Multiplexing" in text and "2 running" in text, text

    # the event log, appended in the lead pod where its REST server (and web UI) reads it
    (path,) = lead.files
    assert path == "/run/flux/state/restful/controllers/multiplex.jsonl"
    records = [json.loads(line) for line in lead.files[path].splitlines()]
    assert [r["kind"] for r in records if r["kind"] == "submitted"] == ["submitted", "submitted"]
    assert all(r["loop"] == "multiplex" and r["cluster"] == "demo" for r in records)

    for _ in range(60):
        _tick(operator, clock)
        if _condition(fake)[1] == "Done":
            break
    assert _condition(fake)[:2] == ("True", "Done") and _reasons(fake).count("SimulationFinished") == 2
    assert _tick(operator, clock) == 0, "a finished controller no longer steps"
    assert operator.multiplexers is not None
    assert KEY in operator.multiplexers.loops, "nor restarts while its spec is unchanged"


def test_disabling_or_deleting_stops_the_controller(
    fake: FakeKube, operator: Controller, clock, make_mc, lead: Lead, sims: list[ScriptedSimulations]
) -> None:
    fake.node_cpu = "4"
    fake.create(custom_resource(make_mc(size=2, tasks=4, multiplexing=MUX), "hpc"))
    operator.start()
    _settle(operator, clock)
    for _ in range(5):
        _tick(operator, clock)
    assert "sim1" in sims[0].started
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"multiplexing": {"enabled": False}}})
    _settle(operator, clock)
    assert operator.multiplexers is not None and operator.multiplexers.loops == {}
    assert _condition(fake)[:2] == ("False", "Disabled") and _reasons(fake)[-1] == "Disabled"
    assert "stopped" in sims[0].cancelled["sim1"], "its running simulation was cancelled, not left unminded"
    resizes = _resizes(fake)
    assert _tick(operator, clock, 10) == 0 and _resizes(fake) == resizes, "a stopped controller resizes nothing"

    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"multiplexing": {"enabled": True}}})
    _settle(operator, clock)
    assert KEY in operator.multiplexers.loops and len(sims) == 2, "re-enabled: a fresh controller"
    assert _reasons(fake)[-1] == "Started"
    fake.delete(MINICLUSTER, "hpc", "demo", "Foreground")
    _settle(operator, clock)
    assert operator.multiplexers.loops == {}
    assert _tick(operator, clock) == 0


def test_a_cluster_without_a_cpu_request_is_told_why_and_nothing_runs(
    fake: FakeKube, operator: Controller, clock, make_mc, lead: Lead, sims: list[ScriptedSimulations]
) -> None:
    mc = make_mc(size=2, tasks=4, multiplexing=MUX, containers=[{"image": "app:1"}])
    fake.create(custom_resource(mc, "hpc"))
    operator.start()
    _settle(operator, clock)
    status, reason, message = _condition(fake)
    assert (status, reason) == ("False", "LoopFailed") and "resources.requests.cpu" in message
    assert operator.multiplexers is not None and operator.multiplexers.loops == {} and sims == []
    for _ in range(3):  # reconciled again (a resync, a pod event): the same reason is not said again
        operator.queue.add(KEY)
        _settle(operator, clock)
    warnings = [e for e in recorded_events(fake) if e["type"] == "Warning" and e["action"] == "Multiplex"]
    assert len(warnings) == 1 and "resources.requests.cpu" in warnings[0]["note"]


def test_the_running_operator_multiplexes_on_its_own_thread(
    fake: FakeKube, make_mc, lead: Lead, tmp_path: Path
) -> None:
    """`Controller.run` as `minicluster operator` runs it (real clock): the multiplex thread deploys and reports."""
    import threading
    import time

    scripted = ScriptedSimulations(time.monotonic)
    start = kubernetes_multiplex_starter(fake, lambda *_: scripted, tmp_path)
    operator = Controller(fake, namespace="hpc", multiplex_start=start)
    fake.create(custom_resource(make_mc(size=2, tasks=4, multiplexing=MUX), "hpc"))
    stop = threading.Event()
    thread = threading.Thread(target=operator.run, args=(stop, 1), daemon=True)
    thread.start()
    try:
        wait_until("the SimulationStarted Event", lambda: "SimulationStarted" in _reasons(fake), timeout=15)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert list(scripted.started) == ["sim1"]
    assert _reasons(fake)[:2] == ["Started", "SimulationStarted"]


@dataclass
class FluxOfTheLead:
    """The lead's Flux as every operator finds it: jobs keep running whoever watches them."""

    clock: Any
    started: dict[str, float] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)

    def submit(self, sim: str) -> str:
        self.submitted.append(sim)
        self.started[sim] = self.clock()
        self.ids[sim] = 1000 + len(self.submitted)
        self.wall[sim] = time.time()
        return encode_f58(self.ids[sim])

    def jobs_json(self) -> str:
        records = [
            {"id": job, "name": sim, "state": "RUN", "result": "", "t_submit": self.wall[sim], "nnodes": 2}
            for sim, job in self.ids.items()
        ]
        return json.dumps({"jobs": records})


@dataclass
class ResumableSimulations(ScriptedSimulations):
    """ScriptedSimulations over the lead's Flux, handing their run to the next controller (as FluxSimulations)."""

    flux: FluxOfTheLead | None = None
    run: str = "/data/multiplex/run-1"
    jobs: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)

    def submit(self, sim: str, profile_iterations: int) -> Submitted:
        assert self.flux is not None
        self.jobs[sim] = self.flux.submit(sim)
        self.started = self.flux.started
        return Submitted(True, job_id=self.jobs[sim])

    def record(self) -> RunRecord:
        return RunRecord(self.run, dict(self.jobs), dict(self.attempts))

    def restore(self, record: RunRecord) -> None:
        self.run, self.jobs, self.attempts = record.run, dict(record.jobs), dict(record.attempts)
        assert self.flux is not None
        self.started = {sim: self.flux.started[sim] for sim in self.jobs}


def _mux_operator(fake: FakeKube, clock: Any, flux: FluxOfTheLead, tmp_path: Path) -> Controller:
    def simulations(*_: Any) -> ResumableSimulations:
        return ResumableSimulations(clock, flux=flux)

    def backend_for(namespace: str) -> KubernetesBackend:
        return KubernetesBackend(api=fake, namespace=namespace, clock=clock, sleep=clock.sleep, resize_wait=5.0)

    start = kubernetes_multiplex_starter(fake, simulations, tmp_path, backend_for)
    return Controller(fake, namespace="hpc", clock=clock, wall=clock.wall, multiplex_start=start)


def test_an_operator_taking_over_goes_on_with_the_run_submitting_nothing_twice(
    fake: FakeKube, clock, make_mc, lead: Lead, tmp_path: Path
) -> None:
    flux = FluxOfTheLead(clock)

    def answers(fake_: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        words = argv[4:] if argv[:2] == ["sh", "-c"] else argv
        if words and words[0].endswith("flux") and words[1:3] == ["jobs", "-a"]:
            return ExecResult(0, flux.jobs_json(), "")
        return lead(fake_, pod, argv)

    fake.exec_handler = answers
    fake.node_cpu = "4"
    fake.create(custom_resource(make_mc(size=2, tasks=4, multiplexing={**MUX, "total": 3}), "hpc"))
    first = _mux_operator(fake, clock, flux, tmp_path / "a")
    first.start()
    _settle(first, clock)
    for _ in range(40):
        _tick(first, clock)
        if len(flux.submitted) == 2:
            break
    assert flux.submitted == ["sim1", "sim2"]
    recorded = fake.stored(MINICLUSTER, "demo")["status"]["multiplexing"]
    assert set(recorded["jobs"]) == {"sim1", "sim2"} and "outcome" not in recorded, recorded

    # the leader is gone; another replica reads status.multiplexing and goes on with the same run
    second = _mux_operator(fake, clock, flux, tmp_path / "b")
    second.start()
    _settle(second, clock)
    status, reason, message = _condition(fake)
    assert (status, reason) == ("True", "Started") and "went on with the run in /data/multiplex/run-1" in message
    assert "2 simulations submitted earlier" in message
    for _ in range(80):
        _tick(second, clock)
        if _condition(fake)[1] == "Done":
            break
    status, reason, message = _condition(fake)
    assert (status, reason) == ("True", "Done") and "3 finished" in message, message
    assert flux.submitted == ["sim1", "sim2", "sim3"], "each simulation submitted once, across both operators"
    assert fake.stored(MINICLUSTER, "demo")["status"]["multiplexing"]["outcome"] == "done"

    # a third finds the run ended: nothing starts again
    third = _mux_operator(fake, clock, flux, tmp_path / "c")
    third.start()
    _settle(third, clock)
    assert third.multiplexers is not None and KEY not in third.multiplexers.loops and len(flux.submitted) == 3
