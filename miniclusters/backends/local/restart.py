"""The Job's restart semantics for local pods: which pods restart, within what budget, and what status shows.

The supervisor (supervisor.py) does the restarting inside each pod; this module decides its policy from the spec
and reads back what it recorded, so `minicluster status` can show RESTARTS as kubectl does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from broker.refused import EXIT_REFUSED
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.local.supervisor import (
    BACKOFF_LIMIT_EXCEEDED,
    CRASH_LOOP,
    STATE_FILE,
    RestartPolicy,
    read_state,
)

__all__ = ["BACKOFF_LIMIT_EXCEEDED", "CRASH_LOOP", "RestartInfo", "policy_for", "restart_info", "restart_settings"]

RESTART_DELAY_ENV = "MINICLUSTERS_LOCAL_RESTART_DELAY"
FAILURES_FILE = "failures"
DEFAULT_DELAY = 1.0
MAX_DELAY = 60.0


def restart_settings(mc: MiniCluster) -> tuple[str, int, float]:
    """(restartPolicy, backoffLimit, first back-off in seconds) for a new cluster.

    restartPolicy defaults to OnFailure as in the rendered Job; the first back-off is
    $MINICLUSTERS_LOCAL_RESTART_DELAY (default 1 s; the kubelet's is 10 s, too slow for one machine).
    """
    text = os.environ.get(RESTART_DELAY_ENV, "")
    try:
        delay = float(text) if text else DEFAULT_DELAY
    except ValueError:
        delay = -1.0
    if not delay >= 0 or delay == float("inf"):
        from miniclusters.backends.base import InvalidRequestError

        raise InvalidRequestError(f"${RESTART_DELAY_ENV}={text!r}: expected a number of seconds >= 0, e.g. 0.5")
    return mc.spec.pod.restart_policy or "OnFailure", mc.spec.backoff_limit, delay


def policy_for(
    index: int,
    restart_policy: str,
    backoff_limit: int,
    delay: float,
    cluster_dir: Path,
    pod_dir: Path,
    cgroup_procs: Path | None,
    interactive: bool = False,
) -> RestartPolicy:
    """Pods restart under OnFailure and Never (the Job recreates a failed index). The lead of a cluster that runs
    a command does not: its exit code is the cluster's result, and a restart would run the command again. The
    lead of an interactive cluster runs nothing of the user's, so its failure is the broker's: it restarts,
    replays its job journal, and the followers (which keep retrying) rejoin it. A broker that refused its input
    (broker/refused.py: the archive of `up --restore`) is never restarted: the same input fails the same way."""
    restarts = restart_policy in ("OnFailure", "Never")
    return RestartPolicy(
        restart=restarts and (index != 0 or interactive),
        backoff_limit=backoff_limit,
        failures_file=str(cluster_dir / FAILURES_FILE),
        state_file=str(pod_dir / STATE_FILE),
        cgroup_procs=str(cgroup_procs) if cgroup_procs else None,
        delay=delay,
        max_delay=max(MAX_DELAY, delay),
        permanent=(EXIT_REFUSED,),
    )


@dataclass(frozen=True)
class RestartInfo:
    restarts: int = 0
    waiting: str | None = None
    """CrashLoopBackOff while waiting to restart, BackoffLimitExceeded once given up."""
    last_exit_code: int | None = None


def restart_info(pod_dir: Path) -> RestartInfo:
    state = read_state(pod_dir / STATE_FILE)
    restarts = state.get("restarts")
    waiting = state.get("waiting")
    code = state.get("last_exit_code")
    return RestartInfo(
        restarts=restarts if isinstance(restarts, int) else 0,
        waiting=waiting if isinstance(waiting, str) else None,
        last_exit_code=code if isinstance(code, int) else None,
    )


def job_failures(cluster_dir: Path) -> int:
    try:
        text = (cluster_dir / FAILURES_FILE).read_text().strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0
