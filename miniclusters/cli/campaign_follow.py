"""`minicluster up SPEC --backend kubernetes` for a spec with a campaign: the operator runs it (spec.campaign), so
`up` applies the MiniCluster and follows the operator's `Campaign` condition until it says how the campaign ended.

The operator reads and writes the members' cases in `spec.campaign.workdir`, a volume it shares with the pods;
where that directory is readable here too (a hostPath on a one-node cluster, a mounted share), `up` prints the
Cl/Cd table from it, as on the local backend. Without an operator nothing would ever happen: `up` says so after
`OPERATOR_WAIT_S` instead of waiting forever.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import Backend, ClusterCondition, ClusterStatus, CreateOptions, NotFoundError
from miniclusters.cli.interrupts import EXIT_INTERRUPTED, TeardownOnInterrupt

CAMPAIGN = "Campaign"
FINISHED = {"Done": 0, "DoneWithFailures": 1}
OPERATOR_WAIT_S = 90.0
"""How long `up` waits for an operator's first word on the campaign (it prepares every member's case first)."""


@dataclass(frozen=True)
class Followed:
    """What following the condition ended with: the exit code, the last words, and whether the campaign ended
    (else nobody answered, or --timeout passed, and ``message`` says which)."""

    code: int
    message: str
    finished: bool = False


def campaign_condition(status: ClusterStatus) -> ClusterCondition | None:
    return next((c for c in status.conditions if c.type == CAMPAIGN), None)


def follow(
    status_of: Callable[[], ClusterStatus],
    say: Callable[[str], None],
    timeout: float | None,
    operator_wait: float = OPERATOR_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    interval: float = 2.0,
) -> Followed:
    """Print each new message of the Campaign condition until its reason says the campaign ended."""
    start = clock()
    last = ""
    seen = False
    while True:
        condition = campaign_condition(status_of())
        if condition is not None:
            seen = True
            line = f"campaign {condition.reason}: {condition.message}"
            if line != last:
                say(line)
                last = line
            if condition.reason in FINISHED:
                return Followed(FINISHED[condition.reason], condition.message, finished=True)
        elapsed = clock() - start
        if not seen and elapsed > operator_wait:
            return Followed(
                1,
                f"no operator reported on the campaign within {operator_wait:.0f}s (no {CAMPAIGN} condition): "
                "run `minicluster operator` for this namespace, or install the operator in the cluster",
            )
        if timeout is not None and elapsed > timeout:
            return Followed(1, f"the campaign did not finish within --timeout {timeout:.0f}s")
        sleep(interval)


def print_results_if_readable(mc: MiniCluster, say: Callable[[str], None]) -> None:
    """The Cl/Cd table from the shared work directory, when this machine sees it."""
    from miniclusters.campaign import session
    from miniclusters.campaign.plan import plan_campaign
    from miniclusters.cli.campaign_render import result_lines

    spec = mc.spec.campaign
    assert spec is not None
    workdir = Path(spec.workdir)
    if not (workdir / "events.jsonl").is_file():
        say(f"results: in spec.campaign.workdir {workdir} on the shared volume (not readable here)")
        return
    for line in result_lines(session.report(plan_campaign(spec, workdir), mc.name)):
        say(line)


def up_through_operator(
    target: Backend,
    mc: MiniCluster,
    options: CreateOptions,
    keep: bool,
    timeout: float | None,
    say: Callable[[str], None],
) -> int:
    """Apply the MiniCluster, follow the operator's campaign, print the results; delete it unless ``keep``."""
    from miniclusters.campaign.kube import shared_workdir

    shared_workdir(mc)  # refused before anything is created when the work directory is not set
    created = False
    with TeardownOnInterrupt(f"deleting MiniCluster {mc.name} (the operator cancels its campaign)"):
        try:
            status = target.create(mc, options)
            created = True
            say(
                f"MiniCluster {mc.name} up: size {status.size} (maxSize {mc.spec.effective_max_size}); "
                "the operator runs its campaign"
            )
            followed = follow(lambda: target.status(mc.name), say, timeout)
            if not followed.finished:
                say(f"error: {followed.message}")
                return followed.code
            print_results_if_readable(mc, say)
            return followed.code
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        finally:
            if created and not keep:
                with contextlib.suppress(NotFoundError):
                    target.delete(mc.name)
                say(f"deleted MiniCluster {mc.name}")
            elif created:
                say(f"kept MiniCluster {mc.name} (--keep): remove it with `minicluster down {mc.name}`")
