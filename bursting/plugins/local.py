"""`local`: a burst as another set of pods on this machine, in its own network, reaching the lead's exposed address.

Everything goes through the local backend's interface: `expose_lead` (the lead pod's address, routed between the
clusters' bridges), `create` (a follower-only MiniCluster, the instance's certificate), `delete`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from bursting.plugin import Burst, BurstError, LeadContext, Verdict
from bursting.plugins.follower import delete_followers, launch_followers
from miniclusters.backends.base import BackendError

MAX_BURST_NODES_ENV = "MINICLUSTERS_BURST_LOCAL_MAX"
"""How many burst pods this machine takes at once (default 8: each pod is a broker process)."""


class LocalPlugin:
    name = "local"

    def __init__(self, context: LeadContext, backend: Any = None) -> None:
        self.context = context
        if backend is None:
            from miniclusters.backends.local.backend import LocalBackend

            state_dir = context.options.get("state_dir") or None
            backend = LocalBackend(state_dir=state_dir, notify=lambda text: None)
        self.backend = backend

    def _limit(self) -> int:
        with contextlib.suppress(ValueError):
            return int(os.environ.get(MAX_BURST_NODES_ENV, "8"))
        return 8

    def can_satisfy(self, nodes: int) -> Verdict:
        limit = min(self._limit(), self.context.size_limit(self.name) or self._limit())
        if nodes > limit:
            return Verdict(False, f"{nodes} node(s) asked, this machine takes at most {limit} burst pods")
        return Verdict(True)

    def expose(self, burst: Burst) -> tuple[str, int]:
        try:
            address, port = self.backend.expose_lead(self.context.cluster, self.context.broker_port)
        except BackendError as exc:
            raise BurstError(str(exc)) from None
        return str(address), int(port)

    def launch(self, burst: Burst) -> None:
        launch_followers(self.backend, self.context, burst)

    def teardown(self, burst: Burst) -> None:
        delete_followers(self.backend, burst)


def plugin(context: LeadContext) -> LocalPlugin:
    """Entry point `local` of `miniclusters.burst_plugins`."""
    return LocalPlugin(context)
