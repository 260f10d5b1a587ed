"""The burst service's view of the lead: the port it needs (LeadPort) and that port over the broker's RPCs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast

from bursting.policy import QueuedJob

if TYPE_CHECKING:
    from broker.jobs.shapes import JobInfoRecord
    from broker.payloads import BurstRegistered, OverlayStatus, ResourceStatus


class JobList(TypedDict):
    """job-manager.list's answer: the active jobs, as the broker's job-list views."""

    jobs: list[JobInfoRecord]


@dataclass(frozen=True)
class NodesView:
    """The lead's ranks: how many are up (excluding bursts), cores per node, every registered hostname."""

    up: int
    cores_per_node: int
    hostnames: tuple[str, ...]
    burst_ranks_up: frozenset[int] = frozenset()


class LeadPort(Protocol):
    """What the service needs from the lead broker."""

    def jobs(self) -> list[QueuedJob]: ...

    def nodes(self) -> NodesView: ...

    def register(self, prefix: str, hosts: list[str]) -> tuple[list[int], list[str]]:
        """Register hosts as ranks; (their ranks, every hostname of the lead after registering)."""
        ...

    def release(self, prefix: str) -> None: ...

    def annotate(self, jobid: int, reason: str) -> None: ...


class HandleLead:
    """LeadPort over the lead broker's RPCs."""

    def __init__(self, uri: str, timeout: float = 10.0) -> None:
        self.uri = uri
        self.timeout = timeout
        self.handle: Any = None

    # open: an RPC's payload, its shape the topic's (as broker.client.Handle.rpc takes it)
    def _rpc(self, topic: str, payload: dict[str, Any] | None = None) -> object:
        """One RPC to the lead, its answer (each caller names the topic's shape); the socket is (re)opened as needed
        (the lead may start after us, or restart)."""
        from broker.client import FluxError, Handle

        try:
            if self.handle is None:
                self.handle = Handle(self.uri)
            reply: object = self.handle.rpc(topic, payload or {}, nodeid=0, timeout=self.timeout)
            return reply
        except FluxError as exc:
            if exc.errnum in (111, 110, 2):  # ECONNREFUSED, ETIMEDOUT, ENOENT: start afresh next time
                self.handle = None
            raise ConnectionError(f"{topic}: {exc}") from None

    def jobs(self) -> list[QueuedJob]:
        # active jobs only: inactive ones hold no ranks
        reply = cast("JobList", self._rpc("job-manager.list", {"states": 0x3F}))
        return [
            QueuedJob(
                id=int(j["id"]),
                state=str(j["state"]),
                nnodes=int(j.get("nnodes") or 0),
                ntasks=int(j.get("ntasks") or 1),
                burstable=bool(j.get("burstable")),
                ranks=tuple(int(r) for r in j.get("ranks") or ()),
            )
            for j in reply["jobs"]
        ]

    def nodes(self) -> NodesView:
        status = cast("OverlayStatus", self._rpc("overlay.status"))
        resources = cast("ResourceStatus", self._rpc("resource.status"))
        reports = resources.get("reports", {})
        cores = [int(r.get("ncores", 0)) for r in reports.values() if isinstance(r, dict)]
        bursts = {int(r["rank"]) for r in status["ranks"] if r.get("burst") and r["state"] == "up"}
        up = sum(1 for r in status["ranks"] if r["state"] == "up" and not r.get("burst"))
        hostnames = tuple(str(r["hostname"]) for r in status["ranks"])
        return NodesView(up, min(cores) if cores else 1, hostnames, frozenset(bursts))

    def register(self, prefix: str, hosts: list[str]) -> tuple[list[int], list[str]]:
        reply = cast("BurstRegistered", self._rpc("overlay.burst-register", {"prefix": prefix, "hosts": hosts}))
        return [int(r) for r in reply["ranks"]], [str(h) for h in reply["hostnames"]]

    def release(self, prefix: str) -> None:
        self._rpc("overlay.burst-release", {"prefix": prefix})

    def annotate(self, jobid: int, reason: str) -> None:
        self._rpc("job-manager.annotate", {"id": jobid, "annotations": {"sched": {"reason_pending": reason}}})

    def report(self, state: str, reason: str, pid: int, stale_after: float) -> None:
        """The service's own state, which the lead shows (broker/burst_service.py); not part of LeadPort."""
        payload = {"state": state, "reason": reason, "pid": pid, "stale_after": stale_after}
        self._rpc("overlay.burst-service", payload)
