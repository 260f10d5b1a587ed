"""Rank 0's membership events: joins coalesced for a time that grows with the instance (tree_link.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from broker.membership import DOWN, UP, Membership, Quorum
from broker.tree_link import MEMBERSHIP_EVENT_DELAY, TreeLink, membership_event_delay


@pytest.mark.parametrize(("size", "delay"), [(1, 0.05), (16, 0.05), (100, 0.05), (256, 0.128), (512, 0.256)])
def test_the_coalescing_delay_is_50_ms_or_half_a_millisecond_per_broker(size: int, delay: float) -> None:
    assert membership_event_delay(size) == pytest.approx(delay)


@dataclass
class _Loop:
    timers: list[tuple[float, Any]] = field(default_factory=list)

    def call_later(self, delay: float, callback: Any) -> None:
        self.timers.append((delay, callback))


@dataclass
class _Lead:
    """What rank 0's TreeLink reads of the broker (tree_host.TreeHost) and of its lifecycle while joins arrive."""

    size: int
    rank: int = 0
    state: str = "quorum"
    loop: _Loop = field(default_factory=_Loop)
    published: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    membership: Membership = field(init=False)
    quorum: Quorum = field(init=False)

    def __post_init__(self) -> None:
        self.membership = Membership([f"node{i}" for i in range(self.size)])
        self.quorum = Quorum.parse(None, self.size)

    def publish(self, topic: str, payload: dict[str, Any]) -> None:
        self.published.append((topic, payload))

    def debug(self, _text: str) -> None:
        pass

    def set_state(self, state: str) -> None:
        self.state = state

    def start_command(self) -> None:
        pass


@pytest.mark.parametrize("size", [8, 512])
def test_joins_within_the_delay_make_one_event_published_after_it(size: int) -> None:
    lead = _Lead(size)
    tree = TreeLink(lead, lead)  # type: ignore[arg-type]
    for rank in (1, 2, 3):
        lead.membership.set(rank, UP)
        tree._changed([rank])
    # not online yet (the quorum is every rank): gathered four times longer than once online
    assert [delay for delay, _ in lead.loop.timers] == [membership_event_delay(size, online=False)]
    assert lead.loop.timers[0][0] == pytest.approx(4 * (MEMBERSHIP_EVENT_DELAY if size == 8 else 0.256))
    assert lead.published == []
    lead.loop.timers[0][1]()
    assert lead.published == [("membership.update", {"ranks": {"1": "up", "2": "up", "3": "up"}})]
    lead.membership.set(4, UP)
    tree._changed([4])  # the next change starts the next gathering
    assert len(lead.loop.timers) == 2


def test_the_changes_gathered_while_joining_are_published_when_the_instance_comes_online() -> None:
    lead = _Lead(4)
    tree = TreeLink(lead, lead)  # type: ignore[arg-type]
    lead.membership.set(0, UP)
    for rank in (1, 2):
        lead.membership.set(rank, UP)
        tree._changed([rank])
    assert lead.published == [] and len(lead.loop.timers) == 1
    lead.membership.set(3, UP)
    tree._changed([3])  # the last rank: online, and the gathered joins go out with it, first
    assert [topic for topic, _ in lead.published] == ["membership.update", "broker.online"]
    assert lead.published[0][1] == {"ranks": {"1": "up", "2": "up", "3": "up"}}
    lead.loop.timers[0][1]()  # the joining delay's timer, later: nothing left to say
    assert len(lead.published) == 2
    lead.membership.set(2, DOWN)
    tree._changed([2])
    assert lead.loop.timers[-1][0] == membership_event_delay(4)  # online now: the shorter delay
