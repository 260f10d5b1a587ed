"""How `flux resource list`, `flux resource drain` (listing) and `flux overlay status` draw the broker's answers:
pure functions from the typed answers (replies.py) to rows and lines, kept apart from the click commands.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from broker.payloads import OverlayStatus, ResourceStatus

from ..bootstrap import compress_hosts


def resource_rows(
    status: ResourceStatus, allocated: dict[int, int] | None = None, drained: set[int] | None = None
) -> list[tuple[str, int, int, int, str]]:
    """(state, nnodes, ncores, ngpus, nodelist) rows as `flux resource list` prints them.

    `allocated` is cores held by running jobs per rank; a rank partly in use appears in both the free and
    the allocated row, with its cores split, as in Flux. A drained rank that is up is never free: its cores no
    job holds are in a "drained" row (printed only when some rank is drained), as flux-core never schedules them.
    """
    from common import idset

    reports = {int(k): v for k, v in status["reports"].items()}
    hostnames: list[str] = status["hostnames"]
    allocated = allocated or {}
    drained = drained or set()
    # A rank that never reported (its pod not started yet, or removed by a scale-down) still has its cores in
    # the instance's configured R, and Flux lists them as down: the pods of one cluster are alike, so count it
    # like the others rather than as 0 cores.
    counts = [int(report["ncores"]) for report in reports.values()]
    typical = max(set(counts), key=counts.count) if counts else 0

    def ncores(rank: int) -> int:
        return int(reports[rank]["ncores"]) if rank in reports else typical

    up = idset.decode(status["up"])
    used = {rank: min(allocated.get(rank, 0), ncores(rank)) for rank in up}
    idle = [rank for rank in up if used[rank] < ncores(rank)]
    free = [rank for rank in idle if rank not in drained]
    held = [rank for rank in idle if rank in drained]
    busy = [rank for rank in up if used[rank]]
    down = idset.decode(status["down"])
    rows = []
    for state, ranks, cores in (
        ("free", free, sum(ncores(r) - used[r] for r in free)),
        ("allocated", busy, sum(used[r] for r in busy)),
        ("drained", held, sum(ncores(r) - used[r] for r in held)),
        ("down", down, sum(ncores(r) for r in down)),
    ):
        if state == "drained" and not ranks:
            continue
        rows.append((state, len(ranks), cores, 0, compress_hosts([hostnames[r] for r in ranks])))
    return rows


# open: a replies.QueueState, but miniclusters/cli/autoscale_status.py passes the answer it read as JSON
def drain_rows(state: Mapping[str, Any], hostnames: list[str]) -> list[tuple[str, str, str, str, str]]:
    """(timestamp, state, ranks, reason, nodelist) rows as flux-core's `flux resource drain` lists them: ranks
    with one reason and one state together; "draining" while a job still runs there, else "drained"."""
    from common import idset

    busy = {int(r) for job in state.get("running", []) for r in job.get("ranks", [])}
    groups: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for key, entry in (state.get("drain") or {}).items():
        rank = int(key)
        word = "draining" if rank in busy else "drained"
        groups.setdefault((word, str(entry.get("reason", ""))), []).append((rank, float(entry.get("timestamp", 0))))
    rows = []
    for (word, reason), members in sorted(groups.items(), key=lambda item: min(r for r, _ in item[1])):
        ranks = sorted(r for r, _ in members)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(max(t for _, t in members)))
        hosts = compress_hosts([hostnames[r] for r in ranks if r < len(hostnames)])
        rows.append((stamp, word, idset.encode(ranks), reason, hosts))
    return rows


def render_overlay(status: OverlayStatus) -> list[str]:
    """The tree as `flux overlay status` draws it: 'RANK HOST: full|partial|degraded|lost|offline'."""
    ranks = status["ranks"]
    parents: list[int] = status["parents"]
    children: dict[int, list[int]] = {}
    for rank, parent in enumerate(parents):
        children.setdefault(parent, []).append(rank)

    def label(rank: int) -> str:
        return f"{rank} {ranks[rank]['hostname']}: {ranks[rank]['status']}"

    lines = [label(0)]

    def walk(rank: int, prefix: str) -> None:
        kids = children.get(rank, [])
        for index, kid in enumerate(kids):
            last = index == len(kids) - 1
            lines.append(f"{prefix}{'└─ ' if last else '├─ '}{label(kid)}")
            walk(kid, prefix + ("   " if last else "│  "))

    walk(0, "")
    return lines
