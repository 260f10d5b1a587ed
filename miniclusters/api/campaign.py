"""spec.campaign: ensembles of OpenFOAM cases run as Flux sub-instances (a miniclusters extension; off when absent).

A campaign is a list of ensembles; each ensemble is a parameter sweep of one case (NACA0012, rhoSimpleFoam)
and runs as a `flux batch -N nodes` sub-instance whose members (one per swept value) are Flux jobs inside it.
Sizes and CPU follow the spec's own `autoscale` and `multiplexing` sections, so the loops keep their field names.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from pydantic import Field, StrictFloat

from miniclusters.api.spec_base import SpecModel

CASES: tuple[str, ...] = ("naca0012",)
PARAMETERS: tuple[str, ...] = ("angleOfAttack", "mach")
CAMPAIGN_BASE = "base"
"""The work directory's folder of the meshed base case, beside one folder per ensemble: not an ensemble's name."""
MAX_ITERATIONS = 100_000
"""SIMPLE iterations per member at most (a hundred times the tutorial's 1,000: days of solver time per member)."""
MAX_PROFILE_ITERATIONS = 10_000_000
MAX_RANKS = 1024
MAX_ENSEMBLES = 100
MAX_MEMBERS = 1000
"""Values (members) per ensemble at most: each member is a copy of the case on disk."""


class EnsembleSpec(SpecModel):
    """One parameter sweep: a member per value, all members one sub-instance."""

    name: str = Field(max_length=63)
    """A DNS-1123 label, unique in the campaign (names the sub-instance job and its directory)."""
    parameter: Literal["angleOfAttack", "mach"]
    """What the members vary: the angle of attack (degrees) or the free-stream Mach number."""
    values: list[StrictFloat] = Field(min_length=1, max_length=MAX_MEMBERS)
    """One member per value (numbers: `true` or `"15"` are refused, not read as 1 and 15)."""
    nodes: int = Field(default=1, ge=1, strict=True)
    """Pods of the ensemble's sub-instance (`flux batch -N nodes`)."""


class CampaignSpec(SpecModel):
    """The ensembles and how every member runs."""

    case: Literal["naca0012"] = "naca0012"
    """The case every member starts from (Debian's openfoam-examples aerofoilNACA0012, rhoSimpleFoam)."""
    iterations: int = Field(default=20, ge=1, le=MAX_ITERATIONS, strict=True)
    """SIMPLE iterations per member (the bound that keeps a campaign short; coefficients are not converged): an
    integer of at most 100,000 (`true`, `"15"` and `15.0` are refused)."""
    ranks: int = Field(default=2, ge=1, le=MAX_RANKS, strict=True)
    """MPI ranks per member."""
    decomposition: Literal["concentric", "simple", "hierarchical"] = "concentric"
    weights: list[StrictFloat] = Field(default_factory=list, max_length=MAX_RANKS)
    """Concentric ring weights, innermost (near-wall) last; default: equal."""
    profile_iterations: int = Field(default=1500, ge=1, le=MAX_PROFILE_ITERATIONS, strict=True)
    """PMPI windows (MPI_Allreduce calls; rhoSimpleFoam makes hundreds per iteration) before traces are written."""
    sequential: bool = False
    """Run the ensembles one after the other (the rigid baseline); default: all are queued at once."""
    workdir: str = ""
    """Where cases, logs, traces and results go (default: a directory in the state directory)."""
    ensembles: list[EnsembleSpec] = Field(min_length=1, max_length=MAX_ENSEMBLES)


class EnsembleJson(TypedDict):
    """EnsembleSpec in its wire form."""

    name: str
    parameter: str
    values: list[float]
    nodes: int


class CampaignJson(TypedDict, total=False):
    """spec.campaign in its wire form, as a campaign's state file keeps it (CampaignSpec validates it when read
    back); every key once dumped from the model, none when the spec has no campaign."""

    case: str
    iterations: int
    ranks: int
    decomposition: str
    weights: list[float]
    profileIterations: int
    sequential: bool
    workdir: str
    ensembles: list[EnsembleJson]
