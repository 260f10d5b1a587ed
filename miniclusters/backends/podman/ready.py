"""Waiting for a podman cluster's brokers inside its lead: one `podman exec` of the bundle's python3 that asks
the lead broker every 0.1 s until every rank has joined, instead of a status read once a second from outside
(each a `pod ps`, a `container inspect` and an exec: 0.5-4 s on a loaded machine). The status read then
confirms it once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import BackendError, ExecResult
from miniclusters.backends.overlay import Ranks, overlay_ranks
from miniclusters.render.layout import RUN_DIR

log = logging.getLogger(__name__)

POLL_S = 0.1
SOCKETS = [f"{RUN_DIR}/rundir/{name}" for name in ("local-0", "local")]
WAIT_FOR_BROKERS = f"""
import json, os, sys, time
from broker.client import FluxError, Handle
size, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    path = next((s for s in sys.argv[3:] if os.path.exists(s)), None)
    if path:
        try:
            with Handle("local://" + path) as handle:
                while time.monotonic() < deadline:
                    ranks = handle.rpc("overlay.status", timeout=5.0)["ranks"]
                    if sum(r.get("state") == "up" for r in ranks) >= size:
                        print(json.dumps({{"ranks": ranks}}))
                        sys.exit(0)
                    time.sleep({POLL_S})
        except (FluxError, OSError):
            pass
    time.sleep({POLL_S})
sys.exit(1)
"""
"""python3 -c WAIT_FOR_BROKERS SIZE SECONDS SOCKET...: 0 once SIZE ranks are up in the lead's overlay status
(printed as `flux overlay status --json` prints it), 1 when SECONDS pass first. One process asking over one
connection (an RPC costs about a millisecond), where a `flux overlay status` every 0.2 s would start the bundle
each time (0.1 s of CPU); the socket is looked for until the broker has made it."""

RunInLead = Callable[[list[str], float], ExecResult]


def waits_inside(mc: MiniCluster) -> bool:
    """Only a built-in lead that stays up answers `overlay status --json` until every broker joined; a lead that
    runs its command and exits, or real Flux's (no --json), is left to the status reads."""
    return mc.spec.flux.flavour == "builtin" and mc.spec.interactive


def await_brokers(run_in_lead: RunInLead, size: int, timeout: float) -> Ranks | None:
    """The lead's ranks (up, down) once `size` brokers joined, seen from inside the lead, so the status read that
    confirms it need not ask again; None (one log line) when this fast path could not tell, and the caller's
    status reads decide as before."""
    argv = ["python3", "-c", WAIT_FOR_BROKERS, str(size), str(max(1, int(timeout))), *SOCKETS]
    try:
        result = run_in_lead(argv, timeout + 30.0)
    except BackendError as exc:
        log.warning("waiting for the brokers inside the lead failed (%s); reading the status instead", exc)
        return None
    if result.rc != 0:
        why = result.stderr.strip()[-200:] or f"exit {result.rc}"
        log.warning("waiting for the brokers inside the lead failed (%s); reading the status instead", why)
        return None
    try:
        return overlay_ranks(result)
    except BackendError as exc:
        log.warning("waiting for the brokers inside the lead failed (%s); reading the status instead", exc)
        return None
