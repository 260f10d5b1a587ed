"""Leader election through a coordination.k8s.io/v1 Lease: of the operator's replicas one reconciles, the others
wait and take over when it is gone.

As client-go's leaderelection does, a replica never compares the holder's renewTime with its own clock (clocks of
two nodes differ): it notes when it last saw the Lease change, and takes it over only once the record stayed the
same for a whole ``leaseDurationSeconds`` by its own clock. Every write carries the resourceVersion it read, so
of two replicas taking over at once one gets 409 Conflict and keeps waiting. A leader that cannot renew within
its renew deadline stops leading (the caller then exits: the pod restarts as a candidate), so two leaders never
act at once for longer than a lease. A leader that stops cleanly (SIGTERM) gives the Lease up at once, and the
next replica leads within one retry period.

`decide` is pure (tested alone); `LeaderElector` is the thin shell that reads and writes the Lease.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TypedDict, cast

from miniclusters.backends.kubernetes.api import LEASE, ApiError, KubeApi
from miniclusters.kube_shapes import KubeObject
from miniclusters.operator.manifests import LEASE_NAME

log = logging.getLogger("miniclusters.operator.leader")

LEASE_SECONDS = 10.0
"""How long a Lease nobody renews is respected: a killed leader is replaced this long after its last renew."""
RENEW_DEADLINE = 7.0
"""A leader that could not renew for this long stops leading (before its Lease can expire under it)."""
RETRY_SECONDS = 2.0
"""How often the leader renews and a candidate looks."""

Action = Literal["create", "take", "renew", "wait"]


@dataclass(frozen=True)
class Observed:
    """The Lease record as a candidate last saw it and when (its own monotonic clock)."""

    holder: str
    renew_time: str
    transitions: int
    seen_at: float


def decide(lease: KubeObject | None, identity: str, last: Observed | None, now: float) -> tuple[Action, Observed]:
    """What to do with the Lease as it is now: create it, take it (free, or not renewed for its duration), renew
    it (ours), or wait; and the record as observed (``seen_at`` moves only when the record changed)."""
    if lease is None:
        return "create", Observed("", "", 0, now)
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    renew = str(spec.get("renewTime") or "")
    transitions = int(spec.get("leaseTransitions") or 0)
    same = last is not None and (last.holder, last.renew_time, last.transitions) == (holder, renew, transitions)
    observed = last if same and last is not None else Observed(holder, renew, transitions, now)
    if holder == identity:
        return "renew", observed
    duration = float(spec.get("leaseDurationSeconds") or LEASE_SECONDS)
    if not holder or now - observed.seen_at >= duration:
        return "take", observed
    return "wait", observed


def micro_time(moment: datetime) -> str:
    """A MicroTime as the API server writes it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseSpec(TypedDict, total=False):
    """A coordination.k8s.io/v1 Lease's spec."""

    holderIdentity: str
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


def lease_spec(identity: str, action: Action, old: LeaseSpec, now: datetime, duration: float) -> LeaseSpec:
    """The Lease's spec after ``action`` (create, take or renew)."""
    stamp = micro_time(now)
    spec = old.copy()
    if action in ("create", "take"):
        spec["acquireTime"] = stamp
        if action == "take":
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        else:
            spec["leaseTransitions"] = 0
    spec["holderIdentity"] = identity
    spec["leaseDurationSeconds"] = int(duration)
    spec["renewTime"] = stamp
    return spec


class LeaderElector:
    """Campaigns for the Lease ``namespace/name`` as ``identity`` and runs ``lead`` while it holds it."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        identity: str,
        name: str = LEASE_NAME,
        lease_seconds: float = LEASE_SECONDS,
        renew_deadline: float = RENEW_DEADLINE,
        retry_seconds: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.identity = identity
        self.name = name
        self.lease_seconds = lease_seconds
        self.renew_deadline = renew_deadline
        self.retry_seconds = retry_seconds
        self.clock = clock
        self.wall = wall
        self.observed: Observed | None = None
        self.renewed_at: float | None = None
        """When this replica last wrote the Lease as its holder (None: it does not lead)."""

    # ------------------------------------------------------------------ one attempt
    def try_acquire_or_renew(self) -> bool:
        """One look at the Lease, and the write it calls for; True when this replica holds it afterwards."""
        try:
            lease = self._get()
        except ApiError as exc:
            log.warning("cannot read the Lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        now = self.clock()
        action, self.observed = decide(lease, self.identity, self.observed, now)
        if action == "wait":
            if self.renewed_at is not None:
                log.error("%s: the Lease is held by %s now", self.identity, self.observed.holder)
                self.renewed_at = None  # another replica took it: this one must stop at once
            return False
        old = cast(LeaseSpec, (lease or {}).get("spec") or {})  # the stored spec, as the API server returned it
        spec = lease_spec(self.identity, action, old, self.wall(), self.lease_seconds)
        try:
            if lease is None:
                self.api.create(
                    {
                        "apiVersion": LEASE.api_version,
                        "kind": LEASE.kind,
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": dict(spec),
                    }
                )
            else:
                self.api.replace({**lease, "spec": dict(spec)})  # carries the resourceVersion read: 409 when stale
        except ApiError as exc:
            if not (exc.conflict or exc.status == 409):
                log.warning("cannot write the Lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        if action != "renew":
            log.info("%s leads now (Lease %s/%s, %s)", self.identity, self.namespace, self.name, action)
        self.renewed_at = now
        return True

    def release(self) -> None:
        """Give the Lease up (this replica stops cleanly): the next candidate takes it at its next look."""
        try:
            lease = self._get()
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.identity:
                return
            released = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": micro_time(self.wall())}
            self.api.replace({**lease, "spec": released})
            log.info("%s released the Lease %s/%s", self.identity, self.namespace, self.name)
        except ApiError as exc:
            log.warning("could not release the Lease %s/%s: %s", self.namespace, self.name, exc)
        finally:
            self.renewed_at = None

    def _get(self) -> KubeObject | None:
        try:
            return self.api.get(LEASE, self.namespace, self.name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    # ------------------------------------------------------------------ the loop
    def run(self, stop: threading.Event, lead: Callable[[threading.Event], None]) -> bool:
        """Wait for the Lease (or ``stop``), then run ``lead(leading)`` on a thread while renewing; ``leading`` is
        set when this replica must stop leading. Returns False when leadership was lost (the caller should exit),
        True when ``stop`` ended it (the Lease released)."""
        while not stop.is_set() and not self.try_acquire_or_renew():
            stop.wait(self.retry_seconds)
        if stop.is_set():
            return True
        leading = threading.Event()
        worker = threading.Thread(target=lead, args=(leading,), name="leader", daemon=True)
        worker.start()
        lost = False
        while not stop.is_set() and worker.is_alive():
            stop.wait(self.retry_seconds)
            if stop.is_set():
                break
            if not self.try_acquire_or_renew() and self._past_deadline():
                log.error("%s lost the Lease: stops leading", self.identity)
                lost = True
                break
        leading.set()
        worker.join(timeout=30)
        if not lost:
            self.release()
        return not lost

    def _past_deadline(self) -> bool:
        """Another replica holds the Lease, or this one could not renew it within the renew deadline."""
        return self.renewed_at is None or self.clock() - self.renewed_at >= self.renew_deadline

    def holder(self) -> str:
        """Who holds the Lease now ('' when nobody)."""
        lease = self._get()
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
