"""One word for a cluster's state, from its status: what `status` prints as State and `list` as STATE.

Both verbs take it from here, so they cannot disagree about a cluster (issue 24: a teardown cut short was
"Deleting" to one and "Failed" or "Running" to the other).
"""

from __future__ import annotations

from miniclusters.backends.base import ClusterStatus


def cluster_state(status: ClusterStatus) -> str:
    if status.deleting:
        return "Deleting"
    if status.finished:
        return "Completed" if status.succeeded else "Failed"
    if any(c.type == "Failed" and c.status == "True" for c in status.conditions):
        return "Failed"
    if not status.pods or all(p.phase == "Pending" for p in status.pods):
        return "Pending"
    if status.ready_pods < status.size:
        return "Degraded" if any(p.phase in ("Failed", "Succeeded") or p.reason for p in status.pods) else "Starting"
    return "Running"
