"""The autoscaling section of `minicluster status`: the loop (running, or stopped and why) and the drained ranks.

A loop killed mid-drain leaves its ranks drained; both facts show here, so a cluster whose jobs pend behind a
drain is never a mystery: the drained ranks with their reason and state (from the lead, as `flux resource drain`
lists them), and the loop's last saved state with its process checked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

import click

from miniclusters.autoscaling.state import AutoscalerState
from miniclusters.backends.base import QUERY_TIMEOUT, Backend, BackendError, ClusterStatus

if TYPE_CHECKING:
    from broker.payloads import QueueState


def drain_report(backend: Backend, status: ClusterStatus) -> list[dict[str, str]] | None:
    """The lead's drained ranks grouped by state and reason; None when the lead cannot say."""
    from broker.cli.commands import drain_rows

    if status.ranks_up is None or status.finished:
        return None
    data = _queue_state(backend, status.name)
    if data is None:
        return None
    hostnames = [pod.name for pod in sorted(status.pods, key=lambda p: p.index)]
    return [
        {"since": since, "state": state, "ranks": ranks, "reason": reason, "hosts": hosts}
        for since, state, ranks, reason, hosts in drain_rows(data, hostnames)
    ]


def _queue_state(backend: Backend, name: str) -> QueueState | None:
    """`flux resource demand` of the lead: over its socket on this machine (no process started in a pod with a
    small CPU request), else run in the lead pod."""
    from broker.client import Handle
    from broker.errors import FluxError

    lead_uri = getattr(backend, "lead_uri", None)
    try:
        uri = lead_uri(name) if lead_uri is not None else None
    except BackendError:
        return None
    if uri is not None:
        try:
            with Handle(uri) as handle:
                return cast("QueueState", handle.rpc("job-manager.queue-state", {}, nodeid=0, timeout=5.0))
        except (FluxError, OSError):
            return None
    try:
        answer = backend.exec(name, 0, ["flux", "resource", "demand"], timeout=QUERY_TIMEOUT)
    except BackendError:
        return None
    try:
        data = json.loads(answer.stdout) if answer.rc == 0 else None
    except ValueError:
        return None
    return cast("QueueState", data) if isinstance(data, dict) else None


def print_drains(drains: list[dict[str, str]]) -> None:
    for row in drains:
        hosts = f" ({row['hosts']})" if row["hosts"] else ""
        click.echo(
            f"  Drained ranks {row['ranks']}{hosts}: {row['state']} since {row['since']}: {row['reason'] or '-'}"
        )


def print_autoscaler_state(state: AutoscalerState) -> None:
    """The loop's last saved state, as the multiplexing controller's is shown."""
    alive = "running" if state.get("running") else "stopped" + (f": {state['stopped']}" if state.get("stopped") else "")
    by = {"up": "started by up", "cli": "minicluster autoscale"}.get(str(state.get("started_by")), "")
    draining = state.get("draining") or []
    wanted = state.get("wanted")
    click.echo(
        f"  Autoscaling ({alive}, pid {state.get('pid')}{', ' + by if by else ''}): size {state.get('size')}"
        + (f", the queue asks for {wanted}" if wanted is not None else "")
        + (f"; draining ranks {','.join(str(r) for r in draining)}" if draining else "")
    )
    last = state.get("last_event")
    if isinstance(last, dict):
        words = " ".join(f"{k}={v}" for k, v in last.items() if k not in ("kind", "at"))
        click.echo(f"    last event: {last.get('kind')} {words}".rstrip())
