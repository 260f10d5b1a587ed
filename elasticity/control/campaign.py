"""The campaign controller's decisions (pure): one plan from the two loops, with their disagreements settled.

A campaign runs ensembles (Flux sub-instances, one `flux batch` job each) on a MiniCluster. Two loops look at it:
- the autoscaler (`elasticity.policy.autoscale.plan_autoscale`): the lead's queue of ensembles says how many
  pods are needed; surplus ranks are drained and removed once idle;
- the multiplexer: the PMPI duty cycles of an ensemble's member ranks say how much CPU its pods need
  (need = duty x the equal share the rank had while profiled x headroom); an idle pod needs only its broker.

`CampaignPlanner.decide` merges both into ONE decision (size, drained ranks, per-pod CPU) that the runner carries
out through the control ports (`Actuator.scale`, `Actuator.resize_many`, the queue's drain). Where the loops
disagree, `arbitrate` says which wins and why, and the event log records it:
- shrink vs resize of a pod that goes: the shrink wins (the pod is drained and idle; a request on a pod about to
  be removed is moot);
- grow vs no headroom (new pods at their rigid request would exceed the allocatable CPU): the grow wins while
  ensembles wait (requests are not limits, so nothing is throttled; the new pods are resized as soon as their
  ensembles are profiled), and the multiplexer's plan for the existing pods stands;
- a resize that would take the requests over the allocatable CPU: the requests of unprofiled pods are lowered
  toward the allocatable CPU (the profiled ones carry measured needs), and the multiplexer's wish is logged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from elasticity.control.ports import ClusterView
from elasticity.policy.autoscale import AutoscaleMemory, AutoscaleOptions, QueueView, ScalePlan, plan_autoscale

MemberState = Literal["pending", "running", "done", "failed", "cancelled"]
EnsembleState = Literal["queued", "running", "done", "cancelled"]


@dataclass(frozen=True)
class MemberView:
    """One member as observed: its state, progress and, once profiled, each rank's duty cycle and pod."""

    name: str
    state: MemberState
    iterations: int | None = None
    duty: tuple[float, ...] | None = None
    rank_pods: tuple[int, ...] | None = None
    """The pod index of every rank (from the hostnames in its PMPI traces)."""


@dataclass(frozen=True)
class EnsembleView:
    name: str
    state: EnsembleState
    pods: tuple[int, ...] = ()
    """The pods its sub-instance runs on (empty unless running)."""
    members: tuple[MemberView, ...] = ()

    @property
    def profiled(self) -> bool:
        """Every running member has a profile (and at least one runs)."""
        running = [m for m in self.members if m.state == "running"]
        return bool(running) and all(m.duty is not None and m.rank_pods is not None for m in running)


@dataclass(frozen=True)
class MultiplexKnobs:
    rigid_m: int
    """A pod's request before profiling (the container's CPU request): what a rigid run would hold."""
    headroom: float = 1.2
    floor_m: int = 50
    overhead_m: int = 100
    """Added to every pod for its broker (and the ensemble's sub-instance broker)."""


@dataclass(frozen=True)
class CampaignObservation:
    now: float
    cluster: ClusterView
    queue: QueueView
    ensembles: tuple[EnsembleView, ...]

    @property
    def allocatable_m(self) -> int:
        return sum(n.allocatable_millicores for n in self.cluster.nodes)


@dataclass(frozen=True)
class CampaignDecision:
    size: int | None = None
    drain: frozenset[int] | None = None
    """The ranks the autoscaler holds drained (None: the autoscaler is off, leave drains alone)."""
    cpu: dict[int, int] = field(default_factory=dict)
    reason: str = ""


@dataclass(frozen=True)
class Disagreement:
    pod: int | None
    autoscale: str
    multiplex: str
    winner: Literal["autoscale", "multiplex"]
    why: str


class DisagreementEvent(TypedDict):
    """A Disagreement as the planner records it for the event log (its one kind of event)."""

    t: float
    event: Literal["disagreement"]
    pod: int | None
    autoscale: str
    multiplex: str
    winner: Literal["autoscale", "multiplex"]
    why: str


def pod_needs(
    ensembles: tuple[EnsembleView, ...], pods: tuple[int, ...], knobs: MultiplexKnobs, waiting: bool = False
) -> dict[int, int]:
    """Per pod: what its ensembles' ranks need (profiled) or hold (rigid, unprofiled), plus the broker overhead.

    An idle pod needs only its broker, unless ensembles wait (`waiting`): it is about to get one, so it keeps
    the rigid request rather than being shrunk and grown again a moment later.

    A profiled rank needs duty x share x headroom, where its share is the pod's rigid request divided among the
    ranks that ran there while it was profiled (the equal allocation the duty cycle was measured under).
    """
    need: dict[int, float] = {p: 0.0 for p in pods}
    rigid: set[int] = set()
    busy = {p for e in ensembles if e.state == "running" for p in e.pods}
    for ensemble in ensembles:
        if ensemble.state != "running":
            continue
        running = [m for m in ensemble.members if m.state == "running"]
        if not running and all(m.state != "pending" for m in ensemble.members):
            continue  # every member ended: only the sub-instance's broker is left until the batch job ends
        if not ensemble.profiled:
            rigid.update(p for p in ensemble.pods if p in need)
            continue
        ranks_on: dict[int, int] = {}
        for member in running:
            for pod in member.rank_pods or ():
                ranks_on[pod] = ranks_on.get(pod, 0) + 1
        for member in running:
            for duty, pod in zip(member.duty or (), member.rank_pods or (), strict=False):
                if pod in need:
                    share = knobs.rigid_m / max(1, ranks_on[pod])
                    need[pod] += duty * share * knobs.headroom
    out = {}
    for pod in pods:
        if pod in rigid or (waiting and pod not in busy):
            out[pod] = knobs.rigid_m
        else:
            out[pod] = max(knobs.floor_m, math.ceil(knobs.overhead_m + need[pod]))
    return out


def arbitrate(
    scale: ScalePlan | None,
    cpu: Mapping[int, int],
    obs: CampaignObservation,
    knobs: MultiplexKnobs | None,
    profiled_pods: frozenset[int],
) -> tuple[CampaignDecision, list[Disagreement]]:
    """One decision from the autoscaler's plan and the multiplexer's per-pod CPU; the disagreements settled."""
    view = obs.cluster
    size = scale.size if scale is not None and scale.size != view.size else None
    out_cpu = dict(cpu)
    said: list[Disagreement] = []
    current = {p.index: p.cpu_request or 0 for p in view.pods}
    if size is not None and size < view.size:
        for pod in sorted(p for p in out_cpu if p >= size):
            if out_cpu[pod] != current.get(pod):
                said.append(
                    Disagreement(
                        pod,
                        f"remove pod {pod} (size {view.size} -> {size})",
                        f"resize pod {pod} to {out_cpu[pod]}m",
                        "autoscale",
                        "the pod is drained and idle: a request on a pod about to go is moot",
                    )
                )
            del out_cpu[pod]
    allocatable = obs.allocatable_m
    if size is not None and size > view.size and knobs is not None and allocatable:
        kept = sum(out_cpu.get(p, current.get(p, 0)) for p in current)
        need = kept + (size - view.size) * knobs.rigid_m
        if need > allocatable:
            said.append(
                Disagreement(
                    None,
                    f"grow to {size} pods for {len(obs.queue.pending)} waiting ensemble(s)",
                    f"no headroom: {need}m requested > {allocatable}m allocatable",
                    "autoscale",
                    "ensembles wait and requests are not limits; the new pods are resized once profiled",
                )
            )
    if knobs is not None and allocatable and out_cpu:
        total = sum(out_cpu.get(p, current.get(p, 0)) for p in current if size is None or p < size)
        if total > allocatable:
            rigid = sorted(p for p in out_cpu if p not in profiled_pods)
            excess = total - allocatable
            for pod in rigid:
                cut = min(excess, max(0, out_cpu[pod] - knobs.floor_m))
                if cut:
                    said.append(
                        Disagreement(
                            pod,
                            "keep the pods it has",
                            f"pod {pod} at {out_cpu[pod]}m (rigid, unprofiled)",
                            "autoscale",
                            f"requests would exceed {allocatable}m allocatable: lowered by "
                            f"{cut}m until the pod is profiled",
                        )
                    )
                    out_cpu[pod] -= cut
                    excess -= cut
    changed = {p: m for p, m in out_cpu.items() if current.get(p) != m and p in current}
    reason = scale.reason if scale is not None and size is not None else ""
    drain = scale.drain if scale is not None else None
    return CampaignDecision(size, drain, changed, reason), said


@dataclass
class CampaignPlanner:
    """Carries the autoscaler's memory between ticks; decide() is pure apart from it."""

    autoscale: AutoscaleOptions | None
    multiplex: MultiplexKnobs | None
    memory: AutoscaleMemory = field(default_factory=AutoscaleMemory)
    events: list[DisagreementEvent] = field(default_factory=list)

    def decide(self, obs: CampaignObservation) -> CampaignDecision:
        view = obs.cluster
        scale = None
        if self.autoscale is not None:
            scale = plan_autoscale(obs.queue, view.size, view.sizes, self.autoscale, self.memory, obs.now)
            self.memory = scale.memory
        pods = tuple(p.index for p in view.pods if p.phase == "Running")
        waiting = bool(obs.queue.pending) or any(e.state == "queued" for e in obs.ensembles)
        cpu = pod_needs(obs.ensembles, pods, self.multiplex, waiting) if self.multiplex is not None else {}
        profiled = frozenset(p for e in obs.ensembles if e.state == "running" and e.profiled for p in e.pods)
        decision, said = arbitrate(scale, cpu, obs, self.multiplex, profiled)
        for d in said:
            self.events.append(
                {
                    "t": round(obs.now, 3),
                    "event": "disagreement",
                    "pod": d.pod,
                    "autoscale": d.autoscale,
                    "multiplex": d.multiplex,
                    "winner": d.winner,
                    "why": d.why,
                }
            )
        return decision
