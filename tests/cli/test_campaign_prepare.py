"""`minicluster campaign prepare`: the cases of a spec's campaign made ready without running them (real OpenFOAM
here; the operator runs the same command in the lead pod), and what bad input gets."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from miniclusters.campaign.plan import script_exports
from miniclusters.cli import main
from miniclusters.workdirs import MARKER


def _spec(workdir: Path, **campaign: object) -> dict[str, object]:
    return {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "prep"},
        "spec": {
            "size": 1,
            "containers": [{"image": "ghcr.io/miniclusters/openmpi-openfoam:0.1.0"}],
            "campaign": {
                "case": "naca0012",
                "iterations": 2,
                "ranks": 2,
                "workdir": str(workdir),
                "ensembles": [{"name": "alpha", "parameter": "angleOfAttack", "values": [4]}],
                **campaign,
            },
        },
    }


def test_prepare_makes_every_member_s_case_and_script_with_real_openfoam(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    path = tmp_path / "prep.yaml"
    path.write_text(yaml.safe_dump(_spec(workdir)))
    result = CliRunner().invoke(main, ["campaign", "prepare", str(path)])
    assert result.exit_code == 0, result.output
    assert "prepared alpha-0 (angleOfAttack = 4)" in result.output and "cases ready in" in result.output
    member = workdir / "alpha" / "alpha-0"
    assert (member / "processor0").is_dir() and (member / "processor1").is_dir(), "decomposed for 2 ranks"
    exports = script_exports((workdir / "alpha" / "batch.sh").read_text())
    assert exports["WM_PROJECT_VERSION"] and exports["OMPI_MCA_btl"] == "tcp,self"
    assert json.loads((workdir / MARKER).read_text())["cluster"] == "prep"
    # the operator's form: the same spec as JSON, again (the work directory is already ours)
    again = CliRunner().invoke(main, ["campaign", "prepare", "--spec-json", json.dumps(_spec(workdir))])
    assert again.exit_code == 0, again.output


def test_prepare_refuses_what_it_cannot_prepare_naming_it(tmp_path: Path) -> None:
    runner = CliRunner()
    neither = runner.invoke(main, ["campaign", "prepare"])
    assert neither.exit_code == 2 and "give SPEC_FILE" in neither.output
    spec = _spec(tmp_path / "work")
    spec["spec"].pop("campaign")  # type: ignore[attr-defined]
    none = runner.invoke(main, ["campaign", "prepare", "--spec-json", json.dumps(spec)])
    assert none.exit_code == 2 and "spec.campaign: the MiniCluster has no campaign" in none.output
    broken = runner.invoke(main, ["campaign", "prepare", "--spec-json", "{not json"])
    assert broken.exit_code == 2 and "error:" in broken.output
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "thesis.tex").write_text("years of work")
    taken = runner.invoke(main, ["campaign", "prepare", "--spec-json", json.dumps(_spec(tmp_path / "theirs"))])
    assert taken.exit_code == 2 and "spec.campaign.workdir" in taken.output
    assert (tmp_path / "theirs" / "thesis.tex").read_text() == "years of work"
