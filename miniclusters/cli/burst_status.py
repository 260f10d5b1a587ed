"""The bursts section of `minicluster status`: the burst service's state, burst ranks apart from the pods, and why
pending jobs wait."""

from __future__ import annotations

import json
from typing import TypedDict, cast

import click

from broker.burst_service import ABSENT, service_words
from broker.payloads import ServiceView
from miniclusters.backends.base import QUERY_TIMEOUT, Backend, BackendError, ClusterStatus


class Burst(TypedDict):
    """One burst's ranks beyond the pods, their hosts, and how many are up."""

    name: str
    ranks: list[int]
    hosts: list[str]
    up: int


class BurstReport(TypedDict):
    bursts: list[Burst]
    pending: dict[str, str]
    """Pending job -> why it waits."""
    service: ServiceView | None
    """The burst service's own report (broker/burst_service.py), once the lead has one."""


def burst_report(backend: Backend, status: ClusterStatus) -> BurstReport | None:
    """Burst ranks (grouped by burst) and why pending jobs wait, asked of the lead; None when it cannot say."""
    if status.ranks_up is None or status.finished:
        return None
    try:
        overlay = backend.exec(status.name, 0, ["flux", "overlay", "status", "--json"], timeout=QUERY_TIMEOUT)
        if overlay.rc != 0:  # flux-core's overlay status has no --json: no bursts there to report
            return None
        argv = ["flux", "jobs", "--format", "{id.f58}\t{state}\t{contextual_info}"]
        jobs = backend.exec(status.name, 0, argv, timeout=QUERY_TIMEOUT)
    except BackendError:
        return None
    try:
        document = json.loads(overlay.stdout)
        ranks = document["ranks"]
    except (ValueError, KeyError, TypeError):
        return None
    bursts: dict[str, Burst] = {}
    for rank in ranks:
        if rank.get("burst"):
            entry = bursts.setdefault(rank["burst"], {"name": rank["burst"], "ranks": [], "hosts": [], "up": 0})
            entry["ranks"].append(rank["rank"])
            entry["hosts"].append(rank["hostname"])
            entry["up"] += rank["state"] == "up"
    pending: dict[str, str] = {}
    for line in jobs.stdout.splitlines()[1:] if jobs.rc == 0 else []:
        words = line.split("\t")
        if len(words) == 3 and words[1] in ("DEPEND", "SCHED") and words[2] not in ("", "held", "priority-hold"):
            pending[words[0]] = words[2]
    service = document.get("burst_service")  # what the lead knows of its burst service (broker/burst_service.py)
    return {
        "bursts": list(bursts.values()),
        "pending": pending,
        "service": cast(ServiceView, service) if isinstance(service, dict) else None,
    }


def print_bursts(report: BurstReport) -> None:
    """The text form, under the pods table (the service's line once one has reported, or work is waiting on it)."""
    service = report.get("service")
    if service and (service.get("state") != ABSENT or report["bursts"] or report["pending"]):
        click.echo(f"  Burst service: {service_words(service)}")
    for burst in report["bursts"]:
        ranks = burst["ranks"]
        shown = f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])
        click.echo(f"  Burst {burst['name']}: ranks {shown} ({burst['up']}/{len(ranks)} up) {','.join(burst['hosts'])}")
    for job, reason in report["pending"].items():
        click.echo(f"  Pending {job}: {reason}")
