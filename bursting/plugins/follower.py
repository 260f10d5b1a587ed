"""Bringing a burst's follower-only MiniCluster up and down through any backend: what every plugin shares.

A plugin decides where the followers go and how they reach the lead; creating and deleting the follower cluster
is the same for all of them, and backend errors become `BurstError` (a pending reason, never a crash).
"""

from __future__ import annotations

from typing import Any

from broker.curve_cert import parse_zcert
from bursting.plugin import Burst, BurstError, LeadContext
from bursting.plugins.burst_spec import burst_minicluster
from miniclusters.api import SpecError, load_minicluster
from miniclusters.backends.base import BackendError, CreateOptions, NotFoundError
from miniclusters.render.options import RenderOptions


def launch_followers(backend: Any, context: LeadContext, burst: Burst, namespace: str | None = None) -> None:
    """Create the burst's MiniCluster with the instance's own certificate (the lead refuses any other)."""
    data = burst_minicluster(context.spec, burst, namespace)
    try:
        mc = load_minicluster(data, source=f"burst {burst.name}")
        render = RenderOptions(certificate=parse_zcert(context.certificate))
        backend.create(mc, CreateOptions(render=render, wait=False))
    except (SpecError, BackendError) as exc:
        raise BurstError(str(exc)) from None


def delete_followers(backend: Any, burst: Burst) -> None:
    """Delete the burst's MiniCluster; one already gone is fine."""
    try:
        backend.delete(burst.name)
    except NotFoundError:
        return
    except BackendError as exc:
        raise BurstError(str(exc)) from None
