"""Waiting for a podman cluster's brokers inside its lead: one `podman exec` whose shell asks the lead broker
every 0.2 s until every rank has joined, instead of a status read (a `pod ps`, a `container inspect` and an exec,
0.5-4 s on a loaded machine) once a second from outside. The status read then confirms it once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import BackendError, ExecResult
from miniclusters.render.layout import RUN_DIR

log = logging.getLogger(__name__)

POLL_S = 0.2
SOCKETS = " ".join(f'"{RUN_DIR}/rundir/{name}"' for name in ("local-0", "local"))
WAIT_FOR_BROKERS = (
    'n=$1; end=$(( $(date +%s) + $2 )); while [ "$(date +%s)" -lt "$end" ]; do '
    f'for s in {SOCKETS}; do if [ -S "$s" ]; then export FLUX_URI="local://$s"; break; fi; done; '
    'if [ -n "${FLUX_URI:-}" ] && out=$(flux overlay status --json 2>/dev/null) '
    '&& [ "$(printf %s "$out" | grep -o \'"state": *"up"\' | wc -l)" -ge "$n" ]; then exit 0; fi; '
    f"sleep {POLL_S}; done; exit 1"
)
"""sh -c WAIT_FOR_BROKERS sh SIZE SECONDS: 0 once SIZE ranks are up in the lead's `flux overlay status --json`,
1 when SECONDS pass first (the socket is looked for each time: the broker may not have made it yet)."""

RunInLead = Callable[[list[str], float], ExecResult]


def waits_inside(mc: MiniCluster) -> bool:
    """Only a built-in lead that stays up answers `overlay status --json` until every broker joined; a lead that
    runs its command and exits, or real Flux's (no --json), is left to the status reads."""
    return mc.spec.flux.flavour == "builtin" and mc.spec.interactive


def await_brokers(run_in_lead: RunInLead, size: int, timeout: float) -> bool:
    """True once `size` brokers joined, seen from inside the lead; False (one log line) when this fast path could
    not tell, and the caller's status reads decide as before."""
    argv = ["sh", "-c", WAIT_FOR_BROKERS, "sh", str(size), str(max(1, int(timeout)))]
    try:
        result = run_in_lead(argv, timeout + 30.0)
    except BackendError as exc:
        log.warning("waiting for the brokers inside the lead failed (%s); reading the status instead", exc)
        return False
    if result.rc != 0:
        why = result.stderr.strip()[-200:] or f"exit {result.rc}"
        log.warning("waiting for the brokers inside the lead failed (%s); reading the status instead", why)
        return False
    return True
