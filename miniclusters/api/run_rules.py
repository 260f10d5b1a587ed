"""Cross-field rules of the run sections: multiplexing, campaign and malleable (split from rules.py, which runs
them among its RULES in this order).

Pure functions over a type-checked MiniCluster, each yielding the problems it finds with their field paths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from miniclusters.api.campaign import CAMPAIGN_BASE
from miniclusters.api.errors import Problem
from miniclusters.api.names import MPI_CALL, dns1123_label_error, is_blank
from miniclusters.api.workdirs import workdir_problem

if TYPE_CHECKING:
    from miniclusters.api.campaign import CampaignSpec
    from miniclusters.api.spec import MiniCluster


def _multiplexing(mc: MiniCluster) -> Iterator[Problem]:
    mux = mc.spec.multiplexing
    if mux.enabled and is_blank(mux.command) and mc.spec.campaign is None:
        yield Problem("spec.multiplexing.command", "required when multiplexing is enabled (the simulation to run)")
    if mux.boundary and not MPI_CALL.fullmatch(mux.boundary):
        yield Problem("spec.multiplexing.boundary", f"{mux.boundary!r} is not an MPI call name (e.g. MPI_Allreduce)")
    if mux.workdir and (problem := workdir_problem(mux.workdir)):
        yield Problem("spec.multiplexing.workdir", problem)
    if mux.total and mux.total < mux.max:
        yield Problem("spec.multiplexing.total", f"{mux.total} is below max ({mux.max}); use 0 for 'as many as max'")
    if mux.profile_together > mux.max:
        yield Problem("spec.multiplexing.profileTogether", f"{mux.profile_together} is above max ({mux.max})")
    if mux.enabled and not mc.spec.interactive and any(c.command for c in mc.spec.containers):
        yield Problem(
            "spec.multiplexing.enabled",
            "the brokers must stay up for the controller's jobs: set interactive: true or leave the command empty",
        )


def _multiplexing_ranks(mc: MiniCluster) -> Iterator[Problem]:
    """A simulation's ranks span the pods (its own rule: it reads spec.tasks and spec.size)."""
    mux = mc.spec.multiplexing
    ranks = mux.ranks or mc.spec.tasks
    if (mux.enabled or mux.ranks) and ranks < mc.spec.size and mc.spec.campaign is None:
        yield Problem(
            "spec.multiplexing.ranks",
            f"{ranks} rank(s) per simulation cannot span the {mc.spec.size} pods (flux submit -N {mc.spec.size} "
            f"-n {ranks}); set ranks (or spec.tasks) to at least size",
        )


def _campaign(mc: MiniCluster) -> Iterator[Problem]:
    """Ensembles that can run here: unique names, sizes within maxSize (or bursting), weights per rank."""
    campaign = mc.spec.campaign
    if campaign is None:
        return
    seen: set[str] = set()
    max_size = mc.spec.effective_max_size
    bursts = bool(mc.spec.flux.bursting.clusters or mc.spec.flux.bursting.plugins)
    for i, ensemble in enumerate(campaign.ensembles):
        path = f"spec.campaign.ensembles[{i}]"
        error = dns1123_label_error(ensemble.name)
        if error:
            yield Problem(f"{path}.name", error)
        elif ensemble.name == CAMPAIGN_BASE:
            yield Problem(f"{path}.name", f"{CAMPAIGN_BASE!r} names the campaign's base case directory; choose another")
        elif ensemble.name in seen:
            yield Problem(f"{path}.name", f"{ensemble.name!r} names another ensemble too; names must be unique")
        seen.add(ensemble.name)
        if ensemble.nodes > max_size and not bursts:
            yield Problem(
                f"{path}.nodes",
                f"{ensemble.nodes} nodes is larger than maxSize ({max_size}) and spec.flux.bursting has no clusters "
                "or plugins to burst with; lower nodes or raise maxSize",
            )
        if ensemble.nodes > campaign.ranks:
            yield Problem(f"{path}.nodes", f"{ensemble.nodes} nodes for members of {campaign.ranks} rank(s) each")
        if len(set(ensemble.values)) != len(ensemble.values):
            yield Problem(f"{path}.values", f"{ensemble.values} repeats a value; one member per value")
        limits = (-30.0, 30.0) if ensemble.parameter == "angleOfAttack" else (0.05, 0.95)
        for j, value in enumerate(ensemble.values):
            if not limits[0] <= value <= limits[1]:
                yield Problem(
                    f"{path}.values[{j}]", f"{value} is outside [{limits[0]:g}, {limits[1]:g}] for {ensemble.parameter}"
                )
    yield from _campaign_settings(mc, campaign)


def _campaign_settings(mc: MiniCluster, campaign: CampaignSpec) -> Iterator[Problem]:
    """The campaign's weights and workdir, and the commands a campaign leaves to its members."""
    if campaign.weights and len(campaign.weights) != campaign.ranks:
        yield Problem("spec.campaign.weights", f"{len(campaign.weights)} weights for {campaign.ranks} ranks per member")
    if campaign.weights and campaign.decomposition != "concentric":
        yield Problem("spec.campaign.weights", "weights apply to the concentric decomposition only")
    if any(w <= 0 for w in campaign.weights):
        yield Problem("spec.campaign.weights", "weights must be positive")
    if campaign.workdir and (problem := workdir_problem(campaign.workdir)):
        yield Problem("spec.campaign.workdir", problem)
    if not is_blank(mc.spec.multiplexing.command):
        yield Problem("spec.multiplexing.command", "a campaign runs its own members; leave the command empty")
    if any(c.command for c in mc.spec.containers):
        yield Problem("spec.containers", "a campaign runs its own members; leave the containers' command empty")


def _malleable(mc: MiniCluster) -> Iterator[Problem]:
    """A live malleable run owns the MiniCluster's nodes and jobs: nothing else may start or resize them."""
    spec, malleable = mc.spec, mc.spec.malleable
    if malleable is None:
        return
    if malleable.runtime_min > malleable.runtime_max:
        yield Problem("spec.malleable.runtimeMin", "must not be above runtimeMax")
    if not malleable.runtime_min <= malleable.median_runtime <= malleable.runtime_max:
        yield Problem("spec.malleable.medianRuntime", "must be within [runtimeMin, runtimeMax]")
    if malleable.workdir and (problem := workdir_problem(malleable.workdir)):
        yield Problem("spec.malleable.workdir", problem)
    if spec.campaign is not None or spec.multiplexing.enabled or spec.autoscale.enabled:
        yield Problem(
            "spec.malleable",
            "a malleable run shares the MiniCluster's nodes among its jobs itself; it cannot be combined with a "
            "campaign, multiplexing or autoscaling",
        )
    if any(c.command for c in spec.containers):
        yield Problem("spec.containers", "a malleable run submits its own jobs; leave the containers' command empty")


RUN_RULES: tuple[Callable[[MiniCluster], Iterator[Problem]], ...] = (
    _multiplexing,
    _multiplexing_ranks,
    _campaign,
    _malleable,
)
"""The run sections' rules, in the order rules.RULES runs them."""
