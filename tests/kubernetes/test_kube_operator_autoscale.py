"""The operator autoscales MiniClusters whose spec.autoscale.enabled is true, against the API fake: the lead's
queue is answered through pod exec (the same `flux resource demand` / `drain --set` ExecQueue runs), sizes are
written by the backend's actuator, and each decision shows as an Event and the Autoscaling condition."""

from __future__ import annotations

import json
from typing import Any

import pytest

from common import idset
from miniclusters.backends.base import ExecResult
from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER
from miniclusters.backends.kubernetes.objects import custom_resource
from miniclusters.cli.operator_commands import kubernetes_autoscale_ports
from miniclusters.kube_shapes import Pod
from miniclusters.operator.autoscaling import AutoscalePorts
from miniclusters.operator.conditions import find
from miniclusters.operator.controller import Controller
from miniclusters.operator.loop_types import ClusterKey
from miniclusters.testing.fake_exec import default_exec
from miniclusters.testing.fake_kube import FakeKube
from tests.kubernetes.recorded_events import recorded_events
from tests.waiting import wait_until

KEY = ClusterKey(MINICLUSTER.api_version, "hpc", "demo")
AUTOSCALE = {"enabled": True, "idleSeconds": 60, "cooldownSeconds": 0, "intervalSeconds": 5}


class LeadQueue:
    """What the lead broker answers to `flux resource demand` and `flux resource drain --set IDS`."""

    def __init__(self) -> None:
        self.pending: list[dict[str, Any]] = []
        self.running: list[dict[str, Any]] = []
        self.drains: list[str] = []
        self.reason = ""
        self.broken: str | None = None

    def __call__(self, fake: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        words = argv[4:] if argv[:2] == ["sh", "-c"] else argv
        if words[0].endswith("/flux") and words[1:3] == ["resource", "demand"]:
            if self.broken:
                return ExecResult(69, "", self.broken)
            drained = sorted(idset.decode(self.drains[-1])) if self.drains else []
            reasons = {str(rank): {"reason": self.reason, "timestamp": 0.0} for rank in drained}
            answer = {"pending": self.pending, "running": self.running, "drained": drained, "drain": reasons}
            return ExecResult(0, json.dumps(answer), "")
        if words[0].endswith("/flux") and words[1:4] == ["resource", "drain", "--set"]:
            self.drains.append(words[4])
            self.reason = words[5]  # the autoscaler's own reason, which marks the drains as its own
            return ExecResult(0, "{}", "")
        return default_exec(fake, pod, argv)


@pytest.fixture
def lead(fake: FakeKube) -> LeadQueue:
    queue = LeadQueue()
    fake.exec_handler = queue
    return queue


@pytest.fixture
def operator(fake: FakeKube, clock) -> Controller:
    """The operator as `minicluster operator` wires it: the Kubernetes backend's ports and the lead's queue."""
    return Controller(
        fake, namespace="hpc", clock=clock, wall=clock.wall, autoscale_ports=kubernetes_autoscale_ports(fake)
    )


def _settle(operator: Controller, clock) -> None:
    operator.run_until_idle(advance=clock.advance)


def _tick(operator: Controller, clock, seconds: float = 5.0) -> int:
    """Let `seconds` pass: the due autoscalers step, then the operator reconciles what they changed."""
    clock.advance(seconds)
    assert operator.autoscalers is not None
    stepped = operator.autoscalers.step_due()
    _settle(operator, clock)
    return stepped


def _autoscaling(fake: FakeKube) -> tuple[str, str, str]:
    condition = find(fake.stored(MINICLUSTER, "demo")["status"]["conditions"], "Autoscaling")
    assert condition is not None
    return condition["status"], condition["reason"], condition["message"]


def _reasons(fake: FakeKube) -> list[str]:
    return [e["reason"] for e in recorded_events(fake) if e["action"] == "Autoscale"]


def _size(fake: FakeKube) -> tuple[int, int, int]:
    job = fake.stored(JOB, "demo")["spec"]
    return fake.stored(MINICLUSTER, "demo")["spec"]["size"], job["parallelism"], job["completions"]


def _execs(fake: FakeKube) -> int:
    return sum(1 for c in fake.calls if c.verb == "exec")


def test_an_enabled_cluster_grows_with_its_queue_and_shrinks_after_idle(
    fake: FakeKube, operator: Controller, clock, make_mc, lead: LeadQueue
) -> None:
    fake.create(custom_resource(make_mc(size=1, maxSize=4, autoscale=AUTOSCALE), "hpc"))
    operator.start()
    _settle(operator, clock)
    assert operator.autoscalers is not None and KEY in operator.autoscalers.loops
    assert _autoscaling(fake)[:2] == ("True", "Started") and _reasons(fake) == ["Started"]

    lead.pending = [{"id": 1, "nnodes": 3, "duration": 100.0}]
    assert _tick(operator, clock) == 1
    assert _size(fake) == (3, 3, 3), "the queue asked for 3 nodes: spec.size and the Job follow"
    status, reason, message = _autoscaling(fake)
    assert (status, reason) == ("True", "ScaledUp") and message.startswith("1 -> 3 pods")
    assert _reasons(fake)[-1] == "ScaledUp"
    # The operator's own reconcile of the new size keeps the autoscaler's condition.
    conditions = {c["type"] for c in fake.stored(MINICLUSTER, "demo")["status"]["conditions"]}
    assert {"Ready", "Scaling", "Autoscaling"} <= conditions

    lead.pending, lead.running = [], [{"id": 1, "ranks": [0, 1, 2]}]
    _tick(operator, clock, 60)
    assert _size(fake)[0] == 3, "busy pods are never taken away"
    lead.running = []
    for _ in range(30):
        _tick(operator, clock)
        if _size(fake)[0] == 1:
            break
    assert _size(fake) == (1, 1, 1), "idle past idleSeconds: back to the floor"
    assert [sorted(idset.decode(d)) for d in lead.drains] == [[1, 2], []], "drained first, undrained once gone"
    assert _autoscaling(fake)[:2] == ("True", "ScaledDown")
    reasons = _reasons(fake)
    assert reasons.index("ScaledUp") < reasons.index("Draining") < reasons.index("ScaledDown")
    scales = [c for c in fake.writes() if c.kind == "MiniCluster" and c.verb == "patch" and c.subresource is None]
    assert [c.body["spec"]["size"] for c in scales] == [3, 1], "every size went through the actuator, once each"


def test_disabling_or_deleting_stops_the_loop(
    fake: FakeKube, operator: Controller, clock, make_mc, lead: LeadQueue
) -> None:
    fake.create(custom_resource(make_mc(size=1, maxSize=4, autoscale=AUTOSCALE), "hpc"))
    operator.start()
    _settle(operator, clock)
    _tick(operator, clock)
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"autoscale": {"enabled": False}}})
    _settle(operator, clock)
    assert operator.autoscalers is not None and operator.autoscalers.loops == {}
    assert _autoscaling(fake)[:2] == ("False", "Disabled") and _reasons(fake)[-1] == "Disabled"

    execs = _execs(fake)
    lead.pending = [{"id": 1, "nnodes": 4, "duration": 10.0}]
    assert _tick(operator, clock, 30) == 0
    assert _execs(fake) == execs, "a stopped loop no longer asks the lead"
    assert _size(fake)[0] == 1, "nothing scales a disabled cluster"

    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"autoscale": {"enabled": True, "intervalSeconds": 2}}})
    _settle(operator, clock)
    assert operator.autoscalers.loops[KEY].spec.interval_seconds == 2
    _tick(operator, clock, 2)
    assert _size(fake)[0] == 4, "re-enabled: the loop runs again with the new settings"
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"autoscale": {"idleSeconds": 10}}})
    _settle(operator, clock)
    assert operator.autoscalers.loops[KEY].spec.idle_seconds == 10
    assert _reasons(fake).count("Disabled") == 1 and _reasons(fake)[-1] == "Started", "new settings: a restart"

    fake.delete(MINICLUSTER, "hpc", "demo", "Foreground")
    _settle(operator, clock)
    assert operator.autoscalers.loops == {}


def test_a_broken_queue_becomes_a_condition_and_an_event_not_a_crash(
    fake: FakeKube, operator: Controller, clock, make_mc, lead: LeadQueue
) -> None:
    fake.create(custom_resource(make_mc(size=1, maxSize=4, autoscale=AUTOSCALE), "hpc"))
    operator.start()
    _settle(operator, clock)
    lead.broken = "no broker socket in /run/flux/rundir"
    for _ in range(3):
        _tick(operator, clock)
    status, reason, message = _autoscaling(fake)
    assert (status, reason) == ("False", "LoopFailed") and "no broker socket" in message and "(69)" in message
    warnings = [e for e in recorded_events(fake) if e["type"] == "Warning" and e["reason"] == "LoopFailed"]
    assert len(warnings) == 1, "the same failure is one Event, not one per interval"
    assert operator.autoscalers is not None and KEY in operator.autoscalers.loops

    lead.broken = None
    lead.pending = [{"id": 1, "nnodes": 2, "duration": 10.0}]
    _tick(operator, clock)
    assert _autoscaling(fake)[:2] == ("True", "ScaledUp") and _size(fake)[0] == 2, "it recovers by itself"


def test_a_failing_port_of_one_cluster_leaves_the_others_running(
    fake: FakeKube, clock, make_mc, lead: LeadQueue
) -> None:
    real = kubernetes_autoscale_ports(fake)

    class Exploding:
        def queue(self, name: str) -> Any:
            if name == "bad":
                raise RuntimeError("queue port exploded")
            return real("hpc").queue.queue(name)

        def drain(self, name: str, ranks: frozenset[int]) -> None:
            real("hpc").queue.drain(name, ranks)

    def ports(namespace: str) -> AutoscalePorts:
        good = real(namespace)
        return AutoscalePorts(good.observer, good.actuator, Exploding())

    operator = Controller(fake, namespace="hpc", clock=clock, wall=clock.wall, autoscale_ports=ports)
    fake.create(custom_resource(make_mc(size=1, maxSize=4, autoscale=AUTOSCALE), "hpc"))
    bad = custom_resource(make_mc(size=1, maxSize=4, autoscale=AUTOSCALE), "hpc")
    bad["metadata"]["name"] = "bad"
    fake.create(bad)
    operator.start()
    _settle(operator, clock)
    lead.pending = [{"id": 1, "nnodes": 2, "duration": 10.0}]
    assert _tick(operator, clock) == 2
    broken = find(fake.stored(MINICLUSTER, "bad")["status"]["conditions"], "Autoscaling")
    assert broken is not None and (broken["status"], broken["reason"]) == ("False", "LoopFailed")
    assert broken["message"] == "queue port exploded"
    assert _size(fake)[0] == 2 and fake.stored(MINICLUSTER, "bad")["spec"]["size"] == 1


def test_the_running_operator_autoscales_on_its_own_thread(fake: FakeKube, make_mc, lead: LeadQueue) -> None:
    """`Controller.run` as `minicluster operator` runs it (real clock): the autoscale thread grows the cluster."""
    import threading

    operator = Controller(fake, namespace="hpc", autoscale_ports=kubernetes_autoscale_ports(fake))
    fake.create(custom_resource(make_mc(size=1, maxSize=4, autoscale={**AUTOSCALE, "intervalSeconds": 0.1}), "hpc"))
    lead.pending = [{"id": 1, "nnodes": 3, "duration": 100.0}]
    stop = threading.Event()
    thread = threading.Thread(target=operator.run, args=(stop, 1), daemon=True)
    thread.start()
    try:
        wait_until("the ScaledUp Event (it follows the scale)", lambda: "ScaledUp" in _reasons(fake), timeout=20)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert fake.stored(MINICLUSTER, "demo")["spec"]["size"] == 3
    assert "ScaledUp" in _reasons(fake)
