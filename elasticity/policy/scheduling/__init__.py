"""Job scheduling policies as pure functions from a :class:`Snapshot` to :class:`Decisions`.

The simulator (``elasticity.sim``) and the live controllers call exactly these functions.
"""

from elasticity.policy.scheduling.registry import POLICIES, policy_named
from elasticity.policy.scheduling.types import Decisions, Reserve, Resize, RunningJob, Snapshot, Start, WaitingJob

__all__ = [
    "POLICIES",
    "Decisions",
    "Reserve",
    "Resize",
    "RunningJob",
    "Snapshot",
    "Start",
    "WaitingJob",
    "policy_named",
]
