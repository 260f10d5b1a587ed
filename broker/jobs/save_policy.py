"""What a running job wants when its queue is saved (`minicluster save`): a jobspec attribute it sets at submit.

    flux submit --setattr=save-policy=finish ./solver          # the save waits for it to end
    flux submit --setattr=save-policy=requeue ./solver         # stopped now, runs again after the restore (default)
    flux submit --setattr=save-policy=checkpoint --setattr=checkpoint-signal=SIGUSR1 \\
                --setattr=checkpoint-timeout=2m ./solver       # signalled, given time to write its checkpoint and
                                                               # exit, then requeued (killed at the timeout)

The attributes live under `attributes.system` (Flux's `--setattr` default). Parsed at submit, so a misspelt
policy is refused with the attribute's name, never found at save time.
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from broker.fsd import parse_fsd

if TYPE_CHECKING:
    from broker.jobs.shapes import Jobspec

Policy = Literal["finish", "requeue", "checkpoint"]
POLICIES: tuple[Policy, ...] = ("finish", "requeue", "checkpoint")
DEFAULT_POLICY: Policy = "requeue"
DEFAULT_SIGNAL = signal.SIGUSR1
DEFAULT_CHECKPOINT_TIMEOUT = 60.0


@dataclass(frozen=True)
class SavePolicy:
    """What a save does with a running job, and how it is asked to checkpoint."""

    policy: Policy = DEFAULT_POLICY
    signal: int = int(DEFAULT_SIGNAL)
    timeout: float = DEFAULT_CHECKPOINT_TIMEOUT


def _signal(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < signal.NSIG:
        return value
    text = str(value).upper()
    name = text if text.startswith("SIG") else f"SIG{text}"
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise ValueError(f"attributes.system.checkpoint-signal: {value!r} is not a signal (e.g. SIGUSR1)") from None


def save_policy(jobspec: Jobspec) -> SavePolicy:
    """The job's save policy; ValueError naming the attribute when it is wrong."""
    system = jobspec.get("attributes", {}).get("system", {})
    policy = system.get("save-policy", DEFAULT_POLICY)
    if policy not in POLICIES:
        raise ValueError(f"attributes.system.save-policy: {policy!r} is not one of {', '.join(POLICIES)}")
    sig = _signal(system["checkpoint-signal"]) if "checkpoint-signal" in system else int(DEFAULT_SIGNAL)
    timeout = DEFAULT_CHECKPOINT_TIMEOUT
    if "checkpoint-timeout" in system:
        raw = system["checkpoint-timeout"]
        try:
            timeout = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else parse_fsd(str(raw))
        except ValueError:
            problem = f"attributes.system.checkpoint-timeout: {raw!r} is not a duration (e.g. 90s, 2m)"
            raise ValueError(problem) from None
        if not 0 < timeout < math.inf:
            raise ValueError(f"attributes.system.checkpoint-timeout: {raw!r} must be positive and finite")
    return SavePolicy(policy, sig, timeout)
