"""The burst service's state as the lead knows it, and the words `minicluster status`, /cluster and the pending
burstable jobs all say about it.

The burst service (bursting/service.py) runs beside the lead broker, not in it, so it can die without the lead
noticing: it reports its state over `overlay.burst-service` every few seconds (running, or failed and why), and a
report older than its `stale_after` means it is gone (killed, or stuck). The lead keeps the last report; readers
get a `service_view`, and `service_words` turns that into one line, so every place says the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .payloads import ServiceView

RUNNING = "running"
FAILED = "failed"
STOPPED = "stopped"
ABSENT = "absent"
REPORTED = (RUNNING, FAILED, STOPPED)
"""What a service may report; `absent` (none has reported) and a stale `running` (-> stopped) are the lead's."""
DEFAULT_STALE_AFTER = 15.0
"""Seconds without a report after which a running service is taken for gone (it reports every 2 s)."""


@dataclass(frozen=True)
class ServiceReport:
    """The service's last report, stamped with the lead's monotonic clock (no clock is shared with the service)."""

    state: str
    reason: str
    pid: int
    at: float
    stale_after: float = DEFAULT_STALE_AFTER


def service_view(report: ServiceReport | None, now: float) -> ServiceView:
    """{state, reason, pid, age}: running | failed | stopped (reported, or a running one gone quiet) | absent."""
    if report is None:
        return {
            "state": ABSENT,
            "reason": "none has reported to this lead (spec.flux.bursting.plugins starts one)",
            "pid": 0,
            "age": None,
        }
    age = max(0.0, now - report.at)
    state, reason = report.state, report.reason
    if state == RUNNING and age > report.stale_after:
        state, reason = STOPPED, f"no report for {age:.0f} s (its process is gone or stuck)"
    return {"state": state, "reason": reason, "pid": report.pid, "age": round(age, 1)}


def service_words(view: Mapping[str, Any]) -> str:
    """One line: `running (pid 12)`, `failed: why`, `stopped: why`, `absent: ...`."""
    state = str(view.get("state", ABSENT))
    if state == RUNNING:
        return f"running (pid {view.get('pid')})"
    reason = str(view.get("reason") or "")
    return f"{state}: {reason}" if reason else state


def pending_note(view: Mapping[str, Any]) -> str | None:
    """Why a burstable job that needs a burst waits, when no running service is there to say more; else None."""
    if view.get("state") == RUNNING:
        return None
    return f"needs a burst, but the burst service is {service_words(view)}"
