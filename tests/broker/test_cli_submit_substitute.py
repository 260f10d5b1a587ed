"""`flux submit --cc`'s placeholder substitution (broker/cli/submit.py): copies only what changes."""

from __future__ import annotations

import copy
import json

from broker.cli.submit import substitute
from broker.jobs.build import build_jobspec
from broker.jobs.shapes import Jobspec


def _spec(command: list[str], name: str | None = None) -> Jobspec:
    spec = build_jobspec(command, environment={f"V{i}": "x" for i in range(50)}, cwd="/tmp")
    if name is not None:
        spec["attributes"]["system"]["job"] = {"name": name}
    return spec


def test_placeholders_are_filled_and_the_original_is_untouched() -> None:
    spec = _spec(["echo", "copy{cc}"], name="run{cc}")
    before = copy.deepcopy(spec)
    out = substitute(spec, {"cc": "7"})
    assert out["tasks"][0]["command"] == ["echo", "copy7"]
    assert out["attributes"]["system"]["job"]["name"] == "run7"
    assert spec == before  # the template serves the next copy
    unchanged = json.loads(json.dumps(before))
    unchanged["tasks"][0]["command"] = ["echo", "copy7"]
    unchanged["attributes"]["system"]["job"]["name"] = "run7"
    assert out == unchanged  # nothing else differs


def test_the_environment_is_shared_not_copied_and_no_placeholder_returns_the_same_object() -> None:
    spec = _spec(["echo", "{cc}"])
    out = substitute(spec, {"cc": "1"})
    assert out["attributes"]["system"]["environment"] is spec["attributes"]["system"]["environment"]
    plain = _spec(["true"])
    assert substitute(plain, {"cc": "1"}) is plain  # so `flux submit --cc` encodes it once
