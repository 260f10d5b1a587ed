"""spec.campaign validation: bad input exits 2 naming the field, before anything is prepared or started."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from miniclusters.api import SpecError, load_minicluster
from miniclusters.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "naca0012-campaign.yaml"


def example() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))


def test_example_is_valid_and_registers_slots_for_a_whole_ensemble() -> None:
    from miniclusters.render.entrypoint import broker_options

    mc = load_minicluster(example())
    assert mc.spec.campaign is not None
    assert [e.name for e in mc.spec.campaign.ensembles] == ["alpha", "mach"]
    assert [len(e.values) for e in mc.spec.campaign.ensembles] == [3, 3]
    # three members of two ranks at once on one pod: six task slots per broker
    assert "-Sresource.cores=0-5" in broker_options(mc)


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_minicluster(data)
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d["spec"]["campaign"]["ensembles"][0].update(parameter="reynolds"),
         "spec.campaign.ensembles[0].parameter", "angleOfAttack"),
        (lambda d: d["spec"]["campaign"]["ensembles"][1].update(values=[]),
         "spec.campaign.ensembles[1].values", "at least 1"),
        (lambda d: d["spec"]["campaign"]["ensembles"][0].update(nodes=3),
         "spec.campaign.ensembles[0].nodes", "larger than maxSize (2)"),
        (lambda d: d["spec"]["campaign"]["ensembles"][1].update(name="alpha"),
         "spec.campaign.ensembles[1].name", "unique"),
        (lambda d: d["spec"]["campaign"]["ensembles"][1].update(values=[0.5, 1.5]),
         "spec.campaign.ensembles[1].values[1]", "outside"),
        (lambda d: d["spec"]["campaign"].update(weights=[1, 2, 3]), "spec.campaign.weights", "3 weights for 2 ranks"),
        (lambda d: d["spec"]["campaign"].update(ensembles=[]), "spec.campaign.ensembles", "at least 1"),
        (lambda d: d["spec"]["campaign"].update(turbulence="kOmega"), "spec.campaign.turbulence", "unknown field"),
    ],
)  # fmt: skip
def test_bad_campaign_names_the_field(mutate: Any, field: str, words: str) -> None:
    data = example()
    mutate(data)
    problems = _problems(data)
    assert any(p.startswith(f"{field}:") and words in p for p in problems), problems


def test_a_burst_target_lets_an_ensemble_exceed_max_size() -> None:
    data = example()
    data["spec"]["campaign"]["ensembles"][0]["nodes"] = 2
    data["spec"]["campaign"]["ensembles"][0]["values"] = [0, 4, 8, 12]
    load_minicluster(data)  # within maxSize: fine
    data["spec"]["campaign"]["ensembles"][0]["nodes"] = 3
    data["spec"]["campaign"]["ranks"] = 3
    data["spec"]["campaign"]["weights"] = [1, 1, 3]
    assert any("nodes" in p for p in _problems(data))
    data["spec"]["flux"] = {"bursting": {"clusters": [{"name": "burst-local", "size": 2}]}}
    assert not any("ensembles[0].nodes" in p for p in _problems_or_none(data))


def _problems_or_none(data: dict[str, Any]) -> list[str]:
    try:
        load_minicluster(data)
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda e: e.update(parameter="reynolds"), "spec.campaign.ensembles[0].parameter"),  # unknown parameter
        (lambda e: e.update(values=[]), "spec.campaign.ensembles[0].values"),  # empty sweep
        (lambda e: e.update(nodes=3), "spec.campaign.ensembles[0].nodes"),  # larger than maxSize, no burst
    ],
)
def test_up_with_a_bad_campaign_exits_2_before_anything_starts(
    tmp_path: Path, monkeypatch: Any, mutate: Any, field: str
) -> None:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path / "state"))
    data = example()
    data["metadata"]["name"] = "campaign-bad"
    data["spec"]["campaign"]["workdir"] = str(tmp_path / "work")
    mutate(data["spec"]["campaign"]["ensembles"][0])
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(main, ["up", str(spec)])
    assert result.exit_code == 2, result.output
    assert f"{field}:" in result.output
    assert not (tmp_path / "work").exists()  # no case was prepared
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())  # no cluster


def test_up_refuses_detach_for_a_campaign(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(tmp_path / "state"))
    data = example()
    data["spec"]["campaign"]["workdir"] = str(tmp_path / "work")
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(main, ["up", str(spec), "--detach"])
    assert result.exit_code == 2 and "--detach" in result.output
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("iterations", 10**12, "less than or equal to 100000"),
        ("iterations", 10**30, "less than or equal to 100000"),
        ("iterations", True, "valid integer"),
        ("iterations", "15", "valid integer"),
        ("iterations", 15.0, "valid integer"),
        ("ranks", True, "valid integer"),
        ("ranks", "2", "valid integer"),
        ("ranks", 10**6, "less than or equal to 1024"),
        ("profileIterations", "1500", "valid integer"),
        ("profileIterations", 10**9, "less than or equal to 10000000"),
        ("weights", [True, 3], "valid number"),
    ],
)
def test_counts_are_strict_integers_within_their_maximum(field: str, value: Any, words: str) -> None:
    """Issue 41, item 8: `true` is not 1 and `"15"` is not 15; a count has a documented maximum."""
    data = example()
    data["spec"]["campaign"][field] = value
    problems = _problems(data)
    assert any(p.startswith(f"spec.campaign.{field}") and words in p for p in problems), problems


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda e: e.update(nodes=True), "nodes"),
        (lambda e: e.update(nodes="1"), "nodes"),
        (lambda e: e.update(values=[True, 4]), "values[0]"),
        (lambda e: e.update(values=["4"]), "values[0]"),
        (lambda e: e.update(values=[v / 100 for v in range(-1500, 1502, 3)]), "values: List should have at most"),
    ],
)
def test_an_ensemble_s_counts_and_values_are_strict(mutate: Any, field: str) -> None:
    data = example()
    mutate(data["spec"]["campaign"]["ensembles"][0])
    assert any(p.startswith(f"spec.campaign.ensembles[0].{field}") for p in _problems(data)), _problems(data)


def test_the_largest_counts_and_yaml_numbers_are_accepted() -> None:
    data = yaml.safe_load(EXAMPLE.read_text().replace("iterations: 15 ", "iterations: 100000 "))
    mc = load_minicluster(data)
    assert mc.spec.campaign is not None and mc.spec.campaign.iterations == 100_000
    assert mc.spec.campaign.ensembles[0].values == [0.0, 4.0, 8.0]  # YAML's ints are numbers
