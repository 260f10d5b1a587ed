"""Preparing members with OpenFOAM: the mesh once, a member per value with its free stream, decomposed like the base."""

from __future__ import annotations

from pathlib import Path

from broker.testing import require_tool
from elasticity.workloads.foam import get_entry
from miniclusters.api.campaign import CampaignSpec
from miniclusters.campaign.cases import prepare_base, prepare_member
from miniclusters.campaign.plan import CampaignPlan, plan_campaign


def _plan(tmp_path: Path, ranks: int) -> CampaignPlan:
    spec = CampaignSpec.model_validate(
        {"iterations": 3, "ranks": ranks, "ensembles": [{"name": "a", "parameter": "mach", "values": [0.5]}]}
    )
    return plan_campaign(spec, tmp_path)


def test_member_case_and_a_base_split_another_way_is_prepared_again(tmp_path: Path) -> None:
    require_tool("blockMesh", "openfoam openfoam-examples")
    plan = _plan(tmp_path, 2)
    base = prepare_base(plan, "concentric", [1, 3])
    assert sorted(p.name for p in base.path.glob("processor*")) == ["processor0", "processor1"]
    mesh = (base.path / "constant" / "polyMesh" / "owner").stat().st_mtime
    again = prepare_base(plan, "concentric", [1, 3])
    assert (again.path / "constant" / "polyMesh" / "owner").stat().st_mtime == mesh  # reused, not rebuilt
    member = plan.members[0]
    path = prepare_member(again, member, 3, tmp_path)
    assert sorted(p.name for p in path.glob("processor*")) == ["processor0", "processor1"]
    assert get_entry(path / "system" / "controlDict", "endTime") == "3"
    assert (get_entry(path / "0" / "U", "Uinlet") or "").startswith("(173.")  # Mach 0.5 at 298 K
    three = _plan(tmp_path, 3)
    rebuilt = prepare_base(three, "simple", [])
    assert sorted(p.name for p in rebuilt.path.glob("processor*")) == ["processor0", "processor1", "processor2"]
