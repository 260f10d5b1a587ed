"""The autoscaler's QueuePort over a backend: `flux resource demand` / `flux resource drain --set` run in the
lead pod through the backend's exec (the only way controllers reach pods), so it works on every backend. Its
drains carry the autoscaler's reason, which is how a restarted loop tells them from an operator's."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from elasticity.control.autoscale import DRAIN_REASON
from elasticity.control.ports import ActuatorError
from elasticity.policy.autoscale import QueueView
from miniclusters.backends.base import Backend

if TYPE_CHECKING:
    from broker.payloads import QueueState

LEAD = 0


def local_flux() -> list[str]:
    """The built-in `flux` beside this Python (the local backend's exec sets FLUX_URI to the lead's socket)."""
    return [str(Path(sys.executable).with_name("flux"))]


def lead_flux() -> list[str]:
    """`flux` in a Kubernetes lead pod, at whichever socket its broker opened."""
    from miniclusters.backends.kubernetes.lead import LEAD_RUNDIR
    from miniclusters.backends.overlay import with_lead_socket
    from miniclusters.render.layout import BROKER_INSTALL_DIR

    return with_lead_socket(LEAD_RUNDIR, [f"{BROKER_INSTALL_DIR}/bin/flux"])


class ExecQueue:
    def __init__(self, backend: Backend, flux: Callable[[str], list[str]]) -> None:
        """``flux(name)``: argv prefix that runs `flux` against the lead broker of cluster ``name``."""
        self.backend = backend
        self.flux = flux

    def _run(self, name: str, *args: str) -> object:
        """The JSON object a `flux resource` command prints on the lead (an ActuatorError when it prints none)."""
        result = self.backend.exec(name, LEAD, [*self.flux(name), *args])
        if result.rc != 0:
            raise ActuatorError(f"`flux {' '.join(args)}` on {name}-0 failed ({result.rc}): {result.stderr.strip()}")
        try:
            data = json.loads(result.stdout)
        except json.JSONDecodeError:
            raise ActuatorError(
                f"`flux {' '.join(args)}` on {name}-0 printed no JSON: {result.stdout[:200]!r}"
            ) from None
        if not isinstance(data, dict):
            raise ActuatorError(f"`flux {' '.join(args)}` on {name}-0 printed {type(data).__name__}, not an object")
        return data

    def queue(self, name: str) -> QueueView:
        data = cast("QueueState", self._run(name, "resource", "demand"))
        pending = [p for p in data.get("pending", []) if isinstance(p, dict)]
        running = [r for r in data.get("running", []) if isinstance(r, dict)]
        reasons = data.get("drain")
        if not isinstance(reasons, dict):
            reasons = {}
        return QueueView(
            pending=tuple(int(p["nnodes"]) for p in pending),
            running=tuple(tuple(int(x) for x in r["ranks"]) for r in running),
            draining=frozenset(int(x) for x in data.get("drained", [])),
            pending_estimates=tuple(float(p.get("duration") or 0.0) for p in pending),
            owned=frozenset(
                int(rank)
                for rank, entry in reasons.items()
                if isinstance(entry, dict) and entry.get("reason") == DRAIN_REASON
            ),
        )

    def drain(self, name: str, ranks: frozenset[int]) -> None:
        """`flux resource drain --set RANKS REASON`: the ranks drained with the autoscaler's reason become exactly
        these; an operator's drains (any other reason) stay as they are."""
        from common import idset

        self._run(name, "resource", "drain", "--set", idset.encode(sorted(ranks)) if ranks else "", DRAIN_REASON)
