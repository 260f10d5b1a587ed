"""`flux submit` refuses, naming the flag, a time limit flux-core cannot hold and an attribute or shell option
with no name (both were accepted: `-t 99999999999999999999h` became a duration of 3.6e23 s, `-S =x` an attribute
named "")."""

from __future__ import annotations

import json
import os

import pytest

from broker.testing import run_flux

ENV = dict(os.environ, FLUX_URI="local:///nonexistent/local")  # --dry-run: nothing is sent


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-t", "99999999999999999999h"], "--time-limit: '99999999999999999999h' is too long: at most 999999999d"),
        (["-t", "1000000000d"], "--time-limit: '1000000000d' is too long"),
        (["-t", "99999999999999999999"], "--time-limit: '99999999999999999999' is too long"),  # minutes
        (["-S", "=x"], "--setattr: '=x': a name is required"),
        (["--setattr=user.=x"], "--setattr: 'user.=x': a name is required after 'user.'"),
        (["-S", "system.=1"], "--setattr: 'system.=1': a name is required after 'system.'"),
        (["--setopt", "=x"], "--setopt: '=x': a name is required"),
    ],
)
def test_submit_refuses_naming_the_flag(args: list[str], words: str) -> None:
    proc = run_flux("submit", "--dry-run", *args, "true", env=ENV)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_the_longest_limit_flux_core_takes_and_named_attributes_still_pass() -> None:
    proc = run_flux("submit", "--dry-run", "-t", "999999999d", "-S", "x", "-S", "user.y=2", "true", env=ENV)
    assert proc.returncode == 0, proc.stderr
    attributes = json.loads(proc.stdout)["attributes"]
    assert attributes["system"]["duration"] == 999999999 * 86400.0
    assert attributes["system"]["x"] == 1 and attributes["user"] == {"y": 2}


def test_batch_takes_its_job_name_from_job_name_else_from_the_script(tmp_path) -> None:
    """As flux-core's: `--job-name` wins (the operator finds a campaign's ensembles on the lead by it)."""
    script = tmp_path / "batch.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    named = run_flux("batch", "--dry-run", "-N", "1", "--job-name=alpha", str(script), env=ENV)
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["attributes"]["system"]["job"]["name"] == "alpha"
    plain = run_flux("batch", "--dry-run", "-N", "1", str(script), env=ENV)
    assert json.loads(plain.stdout)["attributes"]["system"]["job"]["name"] == "batch.sh"
