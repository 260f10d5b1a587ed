"""spec.campaign.workdir must be ours before anything is written or deleted there (issue 41, item 1): system paths,
NUL, `..`, a directory holding someone's files or another cluster's work are refused naming the field, before a
file is touched; inside a work directory of ours nothing is deleted through a symlink leading out of it; on podman
only that directory is mounted. spec.multiplexing.workdir follows the same rule."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from miniclusters.api import SpecError, load_minicluster
from miniclusters.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "naca0012-campaign.yaml"


def example(workdir: str, name: str = "camp-wd") -> dict[str, Any]:
    data = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    data["metadata"]["name"] = name
    data["spec"]["campaign"]["workdir"] = workdir
    return data


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_minicluster(data)
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    ("workdir", "words"),
    [
        ("/", "root"),
        ("/etc", "system directory"),
        ("/etc/campaign", "system directory"),
        ("/proc/self", "system directory"),
        ("/usr/local/work", "system directory"),
        ("/tmp", "top-level"),
        ("/home", "top-level"),
        ("/tmp/a\x00b", "NUL"),
        ("/tmp/x/../../etc", "'..'"),
        ("/tmp/./work", "'.'"),
        ("work", "absolute"),
    ],
)
def test_validate_refuses_a_workdir_that_cannot_be_ours(tmp_path: Path, workdir: str, words: str) -> None:
    problems = _problems(example(workdir))
    assert any(p.startswith("spec.campaign.workdir:") and words in p for p in problems), problems
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump(example(workdir)))
    result = CliRunner().invoke(main, ["validate", str(spec)])
    assert result.exit_code == 2 and "spec.campaign.workdir" in result.output, result.output


@pytest.mark.parametrize("workdir", ["/etc/mux", "/", "/tmp/x\x00", "/srv/a/../b"])
def test_validate_refuses_the_same_multiplexing_workdir(workdir: str) -> None:
    data = example("/tmp/c")
    data["spec"]["multiplexing"]["workdir"] = workdir
    assert any(p.startswith("spec.multiplexing.workdir:") for p in _problems(data))


def test_an_ensemble_cannot_be_named_like_the_base_case(tmp_path: Path) -> None:
    data = example(str(tmp_path / "work"))
    data["spec"]["campaign"]["ensembles"][0]["name"] = "base"
    assert any(p.startswith("spec.campaign.ensembles[0].name:") and "base" in p for p in _problems(data))


def test_a_good_workdir_is_accepted(tmp_path: Path) -> None:
    assert load_minicluster(example(str(tmp_path / "work"))).spec.campaign is not None


def _up(tmp_path: Path, workdir: Path, monkeypatch: Any, name: str = "camp-wd") -> Any:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path / "state"))
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(example(str(workdir), name)))
    return CliRunner().invoke(main, ["up", str(spec)])


def _foreign(workdir: Path) -> dict[Path, str]:
    """Someone's files where a campaign would write: in the names `up` used to delete, and one of its own."""
    files = {
        workdir / "notes.txt": "mine\n",
        workdir / "base" / "thesis.tex": "chapter 1\n",
        workdir / "alpha" / "alpha-0" / "data.csv": "1,2\n",
        workdir / "results.csv": "my results\n",
        workdir / "events.jsonl": "{}\n",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


def test_up_refuses_a_directory_full_of_someone_s_files_and_touches_none(tmp_path: Path, monkeypatch: Any) -> None:
    workdir = tmp_path / "theirs"
    files = _foreign(workdir)
    before = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*"))
    result = _up(tmp_path, workdir, monkeypatch)
    assert result.exit_code == 2, result.output
    assert "spec.campaign.workdir" in result.output and "not empty" in result.output, result.output
    assert all(path.read_text() == text for path, text in files.items())
    assert sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*")) == before  # nothing added either
    state = tmp_path / "state"
    assert not state.exists() or not any(p.is_file() for p in state.rglob("*"))  # no cluster, no campaign state


def test_up_refuses_a_symlink_to_a_system_directory(tmp_path: Path, monkeypatch: Any) -> None:
    link = tmp_path / "work"
    link.symlink_to("/proc/self")  # (not /etc: a build with this bug would write and delete there)
    result = _up(tmp_path, link, monkeypatch)
    assert result.exit_code == 2, result.output
    assert "spec.campaign.workdir" in result.output and "/proc, a system directory" in result.output, result.output


def test_up_refuses_another_cluster_s_work_directory(tmp_path: Path, monkeypatch: Any) -> None:
    from miniclusters.workdirs import MARKER, claim

    workdir = tmp_path / "work"
    claim(workdir, "spec.campaign.workdir", "other-campaign", "campaign")
    (workdir / "events.jsonl").write_text("theirs\n")
    result = _up(tmp_path, workdir, monkeypatch)
    assert result.exit_code == 2 and "other-campaign" in result.output, result.output
    assert (workdir / "events.jsonl").read_text() == "theirs\n"
    assert json.loads((workdir / MARKER).read_text())["cluster"] == "other-campaign"


def test_claim_marks_an_empty_or_new_directory_and_takes_back_its_own(tmp_path: Path) -> None:
    from miniclusters.workdirs import MARKER, claim, read_marker

    fresh = tmp_path / "a" / "b"
    assert claim(fresh, "f", "c1", "campaign") == fresh
    marker = read_marker(fresh) or {}
    assert (marker["kind"], marker["cluster"], marker["uid"]) == ("campaign", "c1", os.getuid())
    (fresh / "events.jsonl").write_text("x")
    assert claim(fresh, "f", "c1", "campaign") == fresh  # ours: taken back, marker kept
    with pytest.raises(SpecError, match="campaign work directory of MiniCluster 'c1'"):
        claim(fresh, "f", "c2", "campaign")
    with pytest.raises(SpecError, match=r"f: .*campaign work directory"):
        claim(fresh, "f", "c1", "multiplex")  # a campaign's directory is not a multiplexer's
    empty = tmp_path / "empty"
    empty.mkdir()
    claim(empty, "f", "c1", "campaign")
    assert (empty / MARKER).is_file()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(SpecError, match="not a directory"):
        claim(a_file, "f", "c1", "campaign")
    legacy = tmp_path / "legacy"
    (legacy / "base").mkdir(parents=True)
    claim(legacy, "f", "c1", "campaign", ours=True)  # our own default directory from before the marker


def test_nothing_is_deleted_through_a_symlink_leading_out(tmp_path: Path) -> None:
    from miniclusters.api.campaign import CampaignSpec
    from miniclusters.campaign.cases import prepare_member
    from miniclusters.campaign.plan import plan_campaign, reset_member
    from miniclusters.workdirs import claim

    outside = tmp_path / "outside"
    (outside / "alpha-0" / "pmpi").mkdir(parents=True)
    sentinel = outside / "alpha-0" / "submitted"
    sentinel.write_text("keep me")
    workdir = claim(tmp_path / "work", "spec.campaign.workdir", "c", "campaign")
    (workdir / "alpha").symlink_to(outside)  # planted: the ensemble's folder leads out of the work directory
    spec = CampaignSpec.model_validate({"ensembles": [{"name": "alpha", "parameter": "mach", "values": [0.5]}]})
    member = plan_campaign(spec, workdir).members[0]
    with pytest.raises(OSError, match="leads out"):
        reset_member(member, workdir)
    with pytest.raises(OSError, match="leads out"):
        prepare_member(None, member, 3, workdir)  # type: ignore[arg-type]  # refused before the base is read
    assert sentinel.read_text() == "keep me" and (outside / "alpha-0" / "pmpi").is_dir()


def test_podman_mounts_only_the_work_directory_itself(tmp_path: Path) -> None:
    from miniclusters.campaign.session import WORKDIR_VOLUME, with_shared_workdir

    real = tmp_path / "real-work"
    real.mkdir()
    link = tmp_path / "work"
    link.symlink_to(real)
    mc = load_minicluster(example(str(link)))
    shared = with_shared_workdir(mc, link)
    volume = shared.spec.containers[0].volumes[WORKDIR_VOLUME]
    assert volume.path == str(link) and volume.host_path == str(real)  # the directory, not what a link names


def test_the_multiplexing_controller_claims_its_workdir(tmp_path: Path) -> None:
    from click import UsageError

    from miniclusters.cli.multiplex_commands import _claimed_workdir

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "timeline.jsonl").write_text("their log\n")
    with pytest.raises(UsageError, match=r"--workdir: .*not empty"):
        _claimed_workdir("mux", str(theirs), None)
    with pytest.raises(UsageError, match=r"spec\.multiplexing\.workdir: .*not empty"):
        _claimed_workdir("mux", None, str(theirs))
    assert (theirs / "timeline.jsonl").read_text() == "their log\n"
    assert _claimed_workdir("mux", str(tmp_path / "new"), None) == tmp_path / "new"
    made = _claimed_workdir("mux", None, None)
    assert made.name.startswith("mc-mux-mux-") and made.is_dir()
    made.joinpath(".minicluster-workdir.json").unlink()
    made.rmdir()
