"""A local cluster's conditions in words, as `kubectl describe` shows conditions: type, status, reason, message."""

from __future__ import annotations

from miniclusters.backends.base import ClusterCondition
from miniclusters.backends.local.state import ClusterRecord

# Flux job states, grouped as a user reads a queue.
QUEUE_WORDS = {"DEPEND": "pending", "PRIORITY": "pending", "SCHED": "pending", "RUN": "running"}
QUEUE_WORDS |= {"CLEANUP": "finishing", "INACTIVE": "finished"}
QUEUE_ORDER = ("running", "pending", "finishing", "finished")


def isolation_condition(record: ClusterRecord) -> ClusterCondition:
    """How isolated the pods are, in words."""
    if record.mode != "netns":
        return ClusterCondition(
            "Isolation",
            "False",
            "SharedHost",
            "pods are processes on 127.213.x addresses sharing this machine's network and hostname; "
            "CPU weights are nice levels",
        )
    weights = (
        f"a CPU cgroup (v{record.cgroup_version}, {'cpu.shares' if record.cgroup_version == 1 else 'cpu.weight'})"
        if record.cgroup_version
        else "nice levels for CPU weight (no writable cgroup)"
    )
    return ClusterCondition(
        "Isolation", "True", "Namespaces", f"each pod has its own network namespace, hostname and {weights}"
    )


def queue_condition(counts: dict[str, int]) -> ClusterCondition:
    """The lead's queue in words: reason Idle (nothing pending or running) or Busy, message the counts."""
    grouped: dict[str, int] = {}
    for state, n in counts.items():
        word = QUEUE_WORDS.get(state, state.lower())
        grouped[word] = grouped.get(word, 0) + n
    words = sorted(grouped, key=lambda w: (QUEUE_ORDER.index(w) if w in QUEUE_ORDER else len(QUEUE_ORDER), w))
    message = ", ".join(f"{grouped[w]} {w}" for w in words) if grouped else "no jobs"
    busy = any(grouped.get(w) for w in ("running", "pending", "finishing"))
    return ClusterCondition("Queue", "True", "Busy" if busy else "Idle", message)
