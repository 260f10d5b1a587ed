"""Leader election through a coordination.k8s.io/v1 Lease (operator/leader.py): the decision alone, then two
replicas on the fake and on the real API server (the `kube` fixture), each replica with its own clock."""

from __future__ import annotations

import threading
from typing import Any

from miniclusters.backends.kubernetes.api import LEASE, ApiError
from miniclusters.kube_shapes import KubeObject
from miniclusters.operator.leader import LeaderElector, Observed, decide
from miniclusters.testing.kube_sides import KubeSide
from tests.waiting import holds_for, wait_until

from .conftest import FakeClock


def _lease(holder: str, renew: str = "t1", transitions: int = 0, duration: int = 10) -> KubeObject:
    spec = {"holderIdentity": holder, "renewTime": renew, "leaseTransitions": transitions}
    return {"spec": {**spec, "leaseDurationSeconds": duration}}


def test_decide_takes_a_lease_only_once_it_stayed_unrenewed_for_its_duration_by_our_clock() -> None:
    assert decide(None, "a", None, 0.0)[0] == "create"
    assert decide(_lease("a"), "a", None, 0.0)[0] == "renew"
    assert decide(_lease(""), "a", None, 0.0)[0] == "take"  # released
    action, seen = decide(_lease("b"), "a", None, 100.0)
    assert action == "wait" and seen == Observed("b", "t1", 0, 100.0)
    # the same record 9.9 s later: still b's; 10 s: expired (never compared with b's clock, only with ours)
    assert decide(_lease("b"), "a", seen, 109.9) == ("wait", seen)
    assert decide(_lease("b"), "a", seen, 110.0)[0] == "take"
    # b renewed in between: the record changed, so the wait starts again from when we saw it change
    action, renewed = decide(_lease("b", renew="t2"), "a", seen, 109.0)
    assert action == "wait" and renewed.seen_at == 109.0
    assert decide(_lease("b", renew="t2"), "a", renewed, 118.0)[0] == "wait"


def _electors(kube: KubeSide, clock: FakeClock, name: str) -> tuple[LeaderElector, LeaderElector]:
    def one(identity: str) -> LeaderElector:
        return LeaderElector(kube.api, kube.namespace, identity, name=name, clock=clock, wall=clock.wall)

    return one("replica-a"), one("replica-b")


def test_one_replica_leads_and_the_other_takes_over_once_the_lease_expires(kube: KubeSide) -> None:
    clock = FakeClock()
    a, b = _electors(kube, clock, "lease-expiry")
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    lease = kube.api.get(LEASE, kube.namespace, "lease-expiry")
    assert lease["spec"]["holderIdentity"] == "replica-a" and lease["spec"]["leaseDurationSeconds"] == 10
    for _ in range(5):  # a renews every 2 s: b never takes it
        clock.advance(2.0)
        assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    # a dies (no more renews): b waits one whole lease from when it last saw the record change
    clock.advance(9.0)
    assert not b.try_acquire_or_renew()
    clock.advance(1.0)
    assert b.try_acquire_or_renew()
    lease = kube.api.get(LEASE, kube.namespace, "lease-expiry")
    assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] == 1
    # a comes back (it had only stalled): it sees b holding and stops leading at once
    assert not a.try_acquire_or_renew() and a.renewed_at is None


def test_a_released_lease_is_taken_at_the_next_look(kube: KubeSide) -> None:
    clock = FakeClock()
    a, b = _electors(kube, clock, "lease-release")
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    a.release()
    assert b.holder() == "" and b.try_acquire_or_renew() and b.holder() == "replica-b"


def test_of_two_replicas_writing_from_the_same_read_one_gets_a_conflict(kube: KubeSide) -> None:
    clock = FakeClock()
    a, b = _electors(kube, clock, "lease-race")
    assert a.try_acquire_or_renew()
    a.release()
    stale = kube.api.get(LEASE, kube.namespace, "lease-race")
    assert b.try_acquire_or_renew()
    try:
        kube.api.replace({**stale, "spec": {**stale["spec"], "holderIdentity": "replica-a"}})
    except ApiError as exc:
        assert exc.conflict
    else:
        raise AssertionError("a write from a stale read of the Lease was accepted")
    real_get = kube.api.get
    kube.api.get = lambda *args: stale  # type: ignore[method-assign]  # a read from before b took it
    try:
        assert not a.try_acquire_or_renew()
    finally:
        kube.api.get = real_get  # type: ignore[method-assign]
    assert b.holder() == "replica-b"


def test_the_elector_runs_the_leader_s_work_while_it_holds_the_lease_and_releases_it_on_stop(kube: KubeSide) -> None:
    def elector(identity: str) -> LeaderElector:
        return LeaderElector(kube.api, kube.namespace, identity, name="lease-run", retry_seconds=0.05)

    a, b = elector("replica-a"), elector("replica-b")
    stop_a, stop_b = threading.Event(), threading.Event()
    led: list[str] = []

    def work(who: str) -> Any:
        def lead(leading: threading.Event) -> None:
            led.append(who)
            leading.wait()

        return lead

    ran_a = threading.Thread(target=lambda: a.run(stop_a, work("a")))
    ran_a.start()
    wait_until("a leads", lambda: led == ["a"], timeout=10)
    ran_b = threading.Thread(target=lambda: b.run(stop_b, work("b")))
    ran_b.start()
    holds_for("b waits while a holds the Lease", lambda: led == ["a"], 0.3)
    stop_a.set()  # a stops cleanly: it releases the Lease, b leads at its next look (not one lease later)
    ran_a.join(timeout=10)
    assert a.holder() in ("", "replica-b"), "a released the Lease as it stopped: b need not wait it out"
    wait_until("b leads after a", lambda: led == ["a", "b"], timeout=10)
    stop_b.set()
    ran_b.join(timeout=10)
    assert b.holder() == ""
