"""The cluster page's numbers: ranks up/down from the lead, CPU requested vs in use from each rank's cgroup.

CPU in use is a rate, so it takes two `resource.cpu` reports per rank: the last page's sample is kept, and a
first visit samples twice, half a second apart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from broker.burst_service import ABSENT, service_words
from broker.payloads import CpuReport, DrainEntry, QueueState, ResourceStatus
from broker.rest.answers import CpuReading
from common import idset

Rpc = Callable[[str, int], CpuReading]
"""(topic, rank) -> answer: a request to one rank of the instance (the reader asks `resource.cpu`)."""
FIRST_SAMPLE_GAP = 0.5
STALE_SAMPLE = 60.0


@dataclass(frozen=True)
class RankRow:
    rank: int
    hostname: str
    up: bool
    cores: int
    request_m: int | None = None
    used_m: int | None = None
    cgroup: str = ""
    note: str = ""
    drained: str | None = None
    """The drain reason when the rank takes no new jobs (`flux resource drain`, the autoscaler), else None."""


def request_millicores(report: CpuReport, v2_formula: str = "nonlinear") -> int | None:
    """The CPU request a rank's cgroup weight stands for, through the kubelet's mapping (elasticity/model/cpu.py);
    for cgroup v2 the smallest request with that weight (the mapping is many-to-one)."""
    from elasticity.model import cpu as cpu_model

    weight = report.get("weight")
    if not isinstance(weight, int):
        return None
    if report.get("knob") == "cpu.shares":
        return cpu_model.shares_to_milli(weight)
    return cpu_model.weight_to_milli(weight, v2_formula)


def used_millicores(before: CpuReport, after: CpuReport) -> int | None:
    """CPU in use between two reports of one rank, in millicores (None when either lacks a counter)."""
    a, b = before.get("usage_usec"), after.get("usage_usec")
    elapsed = float(after.get("time", 0.0)) - float(before.get("time", 0.0))
    if not isinstance(a, int) or not isinstance(b, int) or elapsed <= 0:
        return None
    return max(0, round((b - a) / elapsed / 1000))


def rank_rows(
    status: ResourceStatus,
    now: Mapping[int, CpuReading],
    before: Mapping[int, CpuReading],
    drains: Mapping[str, DrainEntry] | None = None,
) -> list[RankRow]:
    """One row per rank of the instance, from `resource.status`, two rounds of `resource.cpu` and the drain table
    (`job-manager.queue-state`'s `drain`: {"<rank>": {"reason", "timestamp"}}) (pure)."""
    drains = drains or {}
    hostnames = list(status.get("hostnames", []))
    up = set(idset.decode(str(status.get("up", ""))))
    reports = {int(rank): report for rank, report in dict(status.get("reports", {})).items()}
    rows = []
    for rank, hostname in enumerate(hostnames):
        report = now.get(rank, CpuReading())
        error = str(report.get("error", ""))
        rows.append(
            RankRow(
                rank=rank,
                hostname=str(hostname),
                up=rank in up,
                cores=int(reports.get(rank, {}).get("ncores", 0)),
                request_m=request_millicores(report),
                used_m=used_millicores(before[rank], report) if rank in before else None,
                cgroup=str(report.get("cgroup", "")),
                note=error or ("" if report.get("cgroup") or rank not in up else "no CPU cgroup readable"),
                drained=str(drains[str(rank)].get("reason", "")) if str(rank) in drains else None,
            )
        )
    return rows


class ClusterReader:
    """Reads the instance through `rpc`; keeps each rank's last CPU report between page loads."""

    def __init__(
        self,
        status: Callable[[], ResourceStatus],
        rpc: Rpc,
        clock: Callable[[], float] = time.monotonic,
        drains: Callable[[], dict[str, DrainEntry]] = dict,
    ):
        self.status = status
        self.rpc = rpc
        self.drains = drains
        self.clock = clock
        self._last: dict[int, tuple[float, CpuReading]] = {}
        self._lock = threading.Lock()

    def _reports(self, ranks: list[int]) -> dict[int, CpuReading]:
        out: dict[int, CpuReading] = {}
        for rank in ranks:
            try:
                out[rank] = self.rpc("resource.cpu", rank)
            except Exception as exc:  # an old broker or a flux-core rank: the row says so
                out[rank] = CpuReading(error=f"resource.cpu: {exc}")
        return out

    def rows(self) -> list[RankRow]:
        status = self.status()
        ranks = sorted(idset.decode(str(status.get("up", ""))))
        with self._lock:
            now = self.clock()
            before = {r: report for r, (t, report) in self._last.items() if now - t < STALE_SAMPLE}
        if any(r not in before for r in ranks):
            first = self._reports([r for r in ranks if r not in before])
            before.update(first)
            time.sleep(FIRST_SAMPLE_GAP)
        current = self._reports(ranks)
        with self._lock:
            stamp = self.clock()
            self._last = {r: (stamp, report) for r, report in current.items() if "error" not in report}
        try:
            drains = self.drains()
        except Exception:  # an instance without a drain table (the flux flavour): no row is drained here
            drains = {}
        return rank_rows(status, current, before, drains)


def broker_reader(service: Any) -> ClusterReader | None:
    """A reader over the built-in broker's job service (its handle); None for a service without one."""
    client = getattr(service, "client", None)
    if client is None or not hasattr(client, "resources"):
        return None

    def status() -> ResourceStatus:
        return cast(ResourceStatus, dict(service.client.resources()))  # the answers, as JSON comes

    def rpc(topic: str, rank: int) -> CpuReading:
        return cast(CpuReading, dict(service.client.handle.rpc(topic, {}, rank, 5.0)))

    def drains() -> dict[str, DrainEntry]:
        queue_state = cast(QueueState, service.client.handle.rpc("job-manager.queue-state", {}, 0, 5.0))
        return dict(queue_state.get("drain", {}))

    return ClusterReader(status, rpc, drains=drains)


def burst_service_line(service: Any) -> str | None:
    """The burst service's state as the lead knows it (broker/burst_service.py), in the words `minicluster
    status` uses; None when no service has reported, or the instance cannot say (the flux flavour)."""
    client = getattr(service, "client", None)
    if client is None or not hasattr(client, "handle"):
        return None
    try:
        view = dict(client.handle.rpc("overlay.status", {}, 0, 5.0)).get("burst_service")
    except Exception:  # an instance that does not answer: the rest of the page still shows
        return None
    if not isinstance(view, dict) or view.get("state", ABSENT) == ABSENT:
        return None
    return service_words(view)
