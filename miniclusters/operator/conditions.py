"""metav1.Condition lists: set one condition, keeping lastTransitionTime unless its status flips."""

from __future__ import annotations

from miniclusters.api.status import ConditionJson

READY = "Ready"
SCALING = "Scaling"
RESIZING = "Resizing"
INVALID_SPEC = "InvalidSpec"
DEGRADED = "Degraded"
AUTOSCALING = "Autoscaling"
MULTIPLEXING = "Multiplexing"
CAMPAIGN = "Campaign"
ALL = (READY, SCALING, RESIZING, INVALID_SPEC, DEGRADED, AUTOSCALING, MULTIPLEXING, CAMPAIGN)


def set_condition(
    conditions: list[ConditionJson],
    kind: str,
    status: bool,
    reason: str,
    message: str,
    now: str,
    generation: int,
) -> list[ConditionJson]:
    """A new list with condition `kind` set; lastTransitionTime changes only when the status changes."""
    word = "True" if status else "False"
    previous = next((c for c in conditions if c.get("type") == kind), None)
    since = previous["lastTransitionTime"] if previous and previous.get("status") == word else now
    new: ConditionJson = {
        "type": kind,
        "status": word,
        "reason": reason,
        "message": message[:32768],
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
    out = [c for c in conditions if c.get("type") != kind]
    out.append(new)
    return sorted(out, key=lambda c: ALL.index(c["type"]) if c["type"] in ALL else len(ALL))


def find(conditions: list[ConditionJson], kind: str) -> ConditionJson | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def is_true(conditions: list[ConditionJson], kind: str) -> bool:
    condition = find(conditions, kind)
    return bool(condition and condition.get("status") == "True")
