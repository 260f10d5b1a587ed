"""`local`: a burst as another set of pods on this machine, in its own network, reaching the lead's exposed address.

Everything goes through the local backend's interface: `expose_lead` (the lead pod's address, routed between the
clusters' bridges), `create` (a follower-only MiniCluster, the instance's certificate), `delete`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from broker.curve_cert import parse_zcert
from bursting.plugin import Burst, BurstError, LeadContext, Verdict
from bursting.plugins.burst_spec import burst_minicluster
from miniclusters.api import SpecError, load_minicluster
from miniclusters.backends.base import BackendError, CreateOptions, NotFoundError
from miniclusters.render.options import RenderOptions

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
        limit = self._limit()
        for cluster in self.context.spec.get("spec", {}).get("flux", {}).get("bursting", {}).get("clusters", []):
            if cluster.get("name") == self.name and cluster.get("size"):
                limit = min(limit, int(cluster["size"]))
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
        data = burst_minicluster(self.context.spec, burst)
        try:
            mc = load_minicluster(data, source=f"burst {burst.name}")
            render = RenderOptions(certificate=parse_zcert(self.context.certificate))
            self.backend.create(mc, CreateOptions(render=render, wait=False))
        except (SpecError, BackendError) as exc:
            raise BurstError(str(exc)) from None

    def teardown(self, burst: Burst) -> None:
        try:
            self.backend.delete(burst.name)
        except NotFoundError:
            return
        except BackendError as exc:
            raise BurstError(str(exc)) from None


def plugin(context: LeadContext) -> LocalPlugin:
    """Entry point `local` of `miniclusters.burst_plugins`."""
    return LocalPlugin(context)
