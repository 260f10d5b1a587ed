"""`minicluster up` of a campaign on Kubernetes follows the operator's Campaign condition: each new message once,
the exit code from how it ended, and a clear error (not a hang) when no operator answers or --timeout passes."""

from __future__ import annotations

from collections.abc import Iterator

from miniclusters.backends.base import ClusterCondition, ClusterStatus
from miniclusters.cli.campaign_follow import follow


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def statuses(*conditions: ClusterCondition | None) -> Iterator[ClusterStatus]:
    last = None
    for condition in conditions:
        last = condition
        yield ClusterStatus("c", "ns", 1, 2, 1, conditions=() if condition is None else (condition,))
    while True:
        yield ClusterStatus("c", "ns", 1, 2, 1, conditions=() if last is None else (last,))


def run(*conditions: ClusterCondition | None, timeout: float | None = None):
    said: list[str] = []
    clock = Clock()
    feed = statuses(*conditions)
    followed = follow(lambda: next(feed), said.append, timeout, operator_wait=30, clock=clock, sleep=clock.sleep)
    return followed, said, clock.now


def test_each_new_message_is_said_once_and_done_exits_zero() -> None:
    running = ClusterCondition("Campaign", "True", "Running", "alpha running (0/3 done)")
    later = ClusterCondition("Campaign", "True", "Running", "alpha running (1/3 done)")
    done = ClusterCondition("Campaign", "True", "Done", "6/6 members completed: ...")
    followed, said, _ = run(None, running, running, later, done)
    assert (followed.code, followed.finished) == (0, True)
    assert said == [
        "campaign Running: alpha running (0/3 done)",
        "campaign Running: alpha running (1/3 done)",
        "campaign Done: 6/6 members completed: ...",
    ]


def test_failures_exit_one() -> None:
    failed = ClusterCondition("Campaign", "False", "DoneWithFailures", "5/6 members completed: ...")
    followed, _, _ = run(failed)
    assert (followed.code, followed.finished) == (1, True)


def test_no_operator_is_an_error_after_the_wait_not_a_hang() -> None:
    followed, said, elapsed = run(None)
    assert (followed.code, followed.finished) == (1, False)
    assert "no operator reported on the campaign within 30s" in followed.message
    assert "minicluster operator" in followed.message
    assert said == [] and 30 < elapsed < 40


def test_timeout_stops_following_a_campaign_that_runs_on() -> None:
    running = ClusterCondition("Campaign", "True", "Running", "alpha running")
    followed, _, elapsed = run(running, timeout=100)
    assert (followed.code, followed.finished) == (1, False)
    assert "--timeout 100s" in followed.message and 100 < elapsed < 110


def test_other_conditions_are_not_the_campaign() -> None:
    ready = ClusterCondition("Ready", "True", "Ready", "all pods ready")
    followed, said, _ = run(ready)
    assert not followed.finished and said == []
