"""The Flux job life cycle: states, results, and which transitions are legal."""

from __future__ import annotations

import enum

from broker.errors import BrokerFailure


class JobState(enum.IntFlag):
    """Flux's state bits (flux_job_state_t), so state masks work as in `flux jobs --filter`."""

    NEW = 1
    DEPEND = 2
    PRIORITY = 4
    SCHED = 8
    RUN = 16
    CLEANUP = 32
    INACTIVE = 64

    @property
    def short(self) -> str:
        return _SHORT[self]


class JobResult(enum.Enum):
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TIMEOUT = "TIMEOUT"

    @property
    def short(self) -> str:
        return {"COMPLETED": "CD", "FAILED": "F", "CANCELED": "CA", "TIMEOUT": "TO"}[self.value]


_SHORT = {
    JobState.NEW: "N",
    JobState.DEPEND: "D",
    JobState.PRIORITY: "P",
    JobState.SCHED: "S",
    JobState.RUN: "R",
    JobState.CLEANUP: "C",
    JobState.INACTIVE: "I",
}
PENDING = JobState.DEPEND | JobState.PRIORITY | JobState.SCHED
RUNNING = JobState.RUN | JobState.CLEANUP
ACTIVE = PENDING | RUNNING | JobState.NEW

# Every state may also jump to CLEANUP/INACTIVE on a fatal exception (cancel before running, etc.).
_NEXT: dict[JobState, frozenset[JobState]] = {
    JobState.NEW: frozenset({JobState.DEPEND, JobState.INACTIVE}),
    JobState.DEPEND: frozenset({JobState.PRIORITY, JobState.CLEANUP}),
    JobState.PRIORITY: frozenset({JobState.SCHED, JobState.CLEANUP}),
    JobState.SCHED: frozenset({JobState.RUN, JobState.PRIORITY, JobState.CLEANUP}),
    JobState.RUN: frozenset({JobState.CLEANUP}),
    JobState.CLEANUP: frozenset({JobState.INACTIVE}),
    JobState.INACTIVE: frozenset(),
}


class TransitionError(BrokerFailure):
    pass


def check_transition(old: JobState, new: JobState) -> None:
    if new not in _NEXT[old]:
        raise TransitionError(f"illegal job state transition {old.name} -> {new.name}")


def parse_states(text: str) -> JobState:
    """`flux jobs --filter` spellings: names, abbreviations, and the groups pending/running/active."""
    mask = JobState(0)
    groups = {"PENDING": PENDING, "RUNNING": RUNNING, "ACTIVE": ACTIVE}
    for word in filter(None, (w.strip().upper() for w in text.split(","))):
        if word in groups:
            mask |= groups[word]
        elif word in JobState.__members__:
            mask |= JobState[word]
        else:
            matches = [s for s, short in _SHORT.items() if short == word]
            if not matches:
                raise ValueError(f"unknown job state {word!r}")
            mask |= matches[0]
    return mask
