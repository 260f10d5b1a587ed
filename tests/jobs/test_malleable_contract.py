"""The malleable contract (broker/jobs/malleable.py): sizes and resize signal as jobspec attributes, refused at
submit with the attribute named, and `--setattr` nesting dotted names as flux-core does."""

from __future__ import annotations

import json
import signal
from typing import Any, cast

import pytest

from broker.jobs.malleable import DEFAULT_TIMEOUT, MalleableSpec, malleable_spec
from broker.jobs.shapes import Jobspec
from broker.testing import run_flux


def _spec(**malleable: Any) -> Jobspec:
    return cast(Jobspec, {"attributes": {"system": {"malleable": malleable}}})  # only the attribute the contract reads


def test_a_job_without_the_attribute_is_rigid() -> None:
    assert malleable_spec(cast(Jobspec, {"attributes": {"system": {}}})) is None


def test_the_contract_reads_sizes_signal_and_timeout_with_defaults() -> None:
    assert malleable_spec(_spec(min=2, max=8)) == MalleableSpec(2, 2, 8, int(signal.SIGUSR1), DEFAULT_TIMEOUT)
    assert malleable_spec(_spec(min=1, pref=4, max=8, signal="USR2", timeout="2m")) == MalleableSpec(
        1, 4, 8, int(signal.SIGUSR2), 120.0
    )


@pytest.mark.parametrize(
    ("malleable", "words"),
    [
        ({"min": 4, "max": 2}, "attributes.system.malleable.min: 4 is above max (2)"),
        ({"min": 2, "pref": 9, "max": 8}, "attributes.system.malleable.pref: 9 is outside [min, max] = [2, 8]"),
        ({"min": 2, "pref": 1, "max": 8}, "attributes.system.malleable.pref: 1 is outside [min, max] = [2, 8]"),
        ({"max": 8}, "attributes.system.malleable.min: required"),
        ({"min": 0, "max": 8}, "attributes.system.malleable.min: 0 is not a node count"),
        ({"min": True, "max": 8}, "attributes.system.malleable.min: True is not a node count"),
        ({"min": 1, "max": 2, "size": 3}, "attributes.system.malleable.size: not a malleable attribute"),
        ({"min": 1, "max": 2, "signal": "NOPE"}, "attributes.system.malleable.signal: 'NOPE' is not a signal"),
        ({"min": 1, "max": 2, "timeout": "soon"}, "attributes.system.malleable.timeout: 'soon' is not a duration"),
        ({"min": 1, "max": 2, "timeout": 0}, "attributes.system.malleable.timeout: 0 must be positive"),
    ],
)
def test_a_contradiction_is_refused_naming_the_attribute(malleable: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError) as refused:
        malleable_spec(_spec(**malleable))
    assert str(refused.value).startswith(words)


def test_submit_refuses_it_with_the_attribute_named_and_nests_dotted_names() -> None:
    refused = run_flux(
        "start", "--test-size=2", "flux", "submit", "-N", "2", "--setattr=malleable.min=3",
        "--setattr=malleable.max=2", "true",
    )  # fmt: skip
    assert refused.returncode != 0
    assert "attributes.system.malleable.min: 3 is above max (2)" in refused.stderr
    outside = run_flux(
        "start", "--test-size=2", "flux", "submit", "-N", "2", "--setattr=malleable.min=1",
        "--setattr=malleable.max=1", "true",
    )  # fmt: skip
    assert "2 nodes (-N) is outside attributes.system.malleable [min, max] = [1, 1]" in outside.stderr
    accepted = run_flux(
        "start", "--test-size=2", "sh", "-c",
        "id=$(flux submit -N 2 --setattr=malleable.min=1 --setattr=malleable.max=2 true) && "
        "flux job info $id jobspec",
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["attributes"]["system"]["malleable"] == {"min": 1, "max": 2}
