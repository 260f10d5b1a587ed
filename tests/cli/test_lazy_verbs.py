"""`minicluster` imports a verb's module only when it runs: every verb stays reachable, and the verbs a script
calls in a loop (status, list, down, exec) do not load the simulator, numpy, the Kubernetes client or plots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from miniclusters.cli import VERBS, main

HEAVY = (
    "numpy",
    "kubernetes",
    "matplotlib",
    "httpx",
    "elasticity.control.multiplex",
    "elasticity.policy.scheduling",
    "miniclusters.campaign.session",
    "miniclusters.autoscaling.runner",
)


def test_every_verb_resolves_to_the_command_of_its_name() -> None:
    context = click.Context(main)
    assert main.list_commands(context) == sorted(VERBS)
    for name in VERBS:
        command = main.get_command(context, name)
        assert isinstance(command, click.Command) and command.name == name


def test_help_lists_every_verb_with_its_summary() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == set(VERBS)


def test_an_unknown_verb_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["statsu"])
    assert result.exit_code == 2 and "No such command 'statsu'" in result.output


@pytest.mark.parametrize("args", [["status", "nosuch"], ["list"], ["down", "nosuch"], ["exec", "nosuch", "--", "true"]])
def test_everyday_verbs_do_not_import_the_heavy_parts(args: list[str], tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "from miniclusters.cli import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"MINICLUSTERS_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert loaded == [], f"minicluster {' '.join(args)} imported {loaded}"
