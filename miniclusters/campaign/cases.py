"""Prepare every member's case on disk: the mesh once, then per member a copy with its free stream, decomposed.

The concentric split (cell centres from OpenFOAM, rings around the aerofoil) is computed once on the base case
and applied to every member through decomposePar's `manual` method: the mesh is the same, only 0/U differs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from elasticity.workloads.foam import run_tool
from elasticity.workloads.naca_sweep import apply_free_stream, free_stream
from elasticity.workloads.openfoam import Case, copy_case, decompose, prepare_naca0012, set_end_time
from miniclusters.api.campaign import CAMPAIGN_BASE
from miniclusters.campaign.plan import CampaignPlan, Member
from miniclusters.workdirs import remove_tree

BASE = CAMPAIGN_BASE
SPLIT_STAMP = "campaign-split.json"
"""How the base case was split (ranks, method, weights): a base split another way is prepared again."""


def prepare_base(plan: CampaignPlan, method: str, weights: Sequence[float]) -> Case:
    """`<workdir>/base`: the tutorial meshed, bounded and decomposed once (reused when already there)."""
    path = plan.workdir / BASE
    split = json.dumps({"ranks": plan.ranks, "method": method, "weights": list(weights)})
    stamp = path / SPLIT_STAMP
    if path.exists() and (not stamp.exists() or stamp.read_text() != split):
        remove_tree(path, plan.workdir)  # an earlier run stopped half-way, or split the mesh another way
    if not path.exists():
        case = prepare_naca0012(path)
        set_end_time(case, plan.iterations)
        decompose(case, plan.ranks, method, weights=list(weights) if weights and method == "concentric" else None)  # type: ignore[arg-type]
        stamp.write_text(split)
        return case
    from elasticity.workloads.foam import mesh_cell_count

    case = Case(path, mesh_cell_count(path))
    set_end_time(case, plan.iterations)
    return case


def prepare_member(base: Case, member: Member, iterations: int, workdir: Path) -> Path:
    """A fresh copy of the base case with this member's free stream, decomposed like the base."""
    remove_tree(member.directory, workdir)
    member.directory.parent.mkdir(parents=True, exist_ok=True)
    case = copy_case(base, member.directory)
    apply_free_stream(case.path, free_stream(member.parameter, member.value))
    set_end_time(case, iterations)
    run_tool(case.path, "decomposePar", "-force")
    (case.path / "pmpi").mkdir(exist_ok=True)
    return case.path


def prepare_members(plan: CampaignPlan, base: Case, say: Callable[[str], None], workers: int = 2) -> list[Path]:
    """Every member's case, `workers` at a time (decomposePar is single-threaded)."""

    def one(member: Member) -> Path:
        path = prepare_member(base, member, plan.iterations, plan.workdir)
        say(f"prepared {member.name} ({member.parameter} = {member.value:g})")
        return path

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, plan.members))
