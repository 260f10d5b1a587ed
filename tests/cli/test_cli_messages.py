"""What the CLI says (issue 24): a blank command is refused naming its flag or field, a limit that comes from the spec
is named by its field path, counts agree with their nouns ("1 pod"), and `up` says a thing once, not at every look."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from miniclusters.backends.base import ClusterStatus, PodStatus
from miniclusters.backends.wait import WaitProgress, is_up
from miniclusters.cli import main
from miniclusters.cli import multiplex_commands as mux_cli
from miniclusters.cli.existing import existing_message
from miniclusters.cli.status_view import render_status_text, status_document
from miniclusters.cli.up_command import _progress_printer
from miniclusters.words import of, plural


def _status(size: int, running: int | None = None) -> ClusterStatus:
    running = size if running is None else running
    pods = tuple(
        PodStatus(index=i, name=f"m-{i}", phase="Running" if i < running else "Pending", ready=i < running)
        for i in range(size)
    )
    return ClusterStatus(name="m", namespace="local", size=size, max_size=size, min_size=1, pods=pods)


class _Store:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def load_spec(self, _name: str) -> dict[str, Any]:
        return self.spec


class _Backend:
    """What `minicluster multiplex` reads before it starts anything: the status and the stored spec."""

    ephemeral = True

    def __init__(self, multiplexing: dict[str, Any]) -> None:
        spec = {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": "m"},
            "spec": {"size": 2, "interactive": True, "containers": [{"image": "local"}], "multiplexing": multiplexing},
        }
        self.store = _Store(spec)

    def status(self, _name: str) -> ClusterStatus:
        return _status(2)


def _multiplex(monkeypatch: pytest.MonkeyPatch, multiplexing: dict[str, Any], *args: str) -> Any:
    monkeypatch.setattr(mux_cli, "open_backend", lambda *_a, **_k: _Backend(multiplexing))
    return CliRunner().invoke(main, ["multiplex", "m", *args])


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_multiplex_command_is_refused_naming_the_flag(monkeypatch: pytest.MonkeyPatch, blank: str) -> None:
    # the spec has a command: a blank --command must not fall back to it silently
    result = _multiplex(monkeypatch, {"command": "proxy_solver 10 64 4 1,1,1,2"}, "--command", blank)
    assert result.exit_code == 2, result.output
    assert "'--command'" in result.output and "empty (or only spaces)" in result.output


@pytest.mark.parametrize(
    "argv",
    [
        ["profile", "--", ""],
        ["profile", "--", "  "],
        ["exec", "m", "--", " "],
        ["submit", "--url", "http://127.0.0.1:9", "--", ""],
    ],
)
def test_a_blank_program_name_is_refused_naming_the_argument(argv: list[str]) -> None:
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert "the program name is empty (or only spaces)" in result.output


def test_a_spec_command_of_spaces_is_refused_naming_the_field(tmp_path: Path) -> None:
    spec = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "blank"},
        "spec": {"size": 1, "containers": [{"image": "local", "command": "   "}]},
    }
    path = tmp_path / "blank.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2 and "spec.containers[0].command: only spaces" in result.output


@pytest.mark.parametrize(
    ("multiplexing", "args", "said"),
    [
        ({"max": 3}, ["--total", "1"], "--total 1 is below spec.multiplexing.max 3"),
        ({"max": 2}, ["--total", "1", "--max", "3"], "--total 1 is below --max 3"),
        ({"total": 2}, ["--max", "3"], "spec.multiplexing.total 2 is below --max 3"),
        ({}, ["--total", "2"], "--total 2 is below the default --max 4"),
        ({"max": 2}, ["--profile-together", "3"], "--profile-together 3 is above spec.multiplexing.max 2"),
        ({"profileTogether": 3}, ["--max", "2"], "spec.multiplexing.profileTogether 3 is above --max 2"),
    ],
)
def test_a_limit_from_the_spec_is_named_by_its_field(
    monkeypatch: pytest.MonkeyPatch, multiplexing: dict[str, Any], args: list[str], said: str
) -> None:
    result = _multiplex(monkeypatch, {"command": "proxy_solver 10 64 4 1,1,1,2", **multiplexing}, *args)
    assert result.exit_code == 2, result.output
    assert f"Error: {said}\n" in result.output


def test_counts_agree_with_their_nouns() -> None:
    assert [plural(n, "pod") for n in (0, 1, 2)] == ["0 pods", "1 pod", "2 pods"]
    assert of(1, 1, "pod") == "1/1 pod" and of(1, 2, "pod") == "1/2 pods"
    one = _status(1)
    text = render_status_text(status_document(one))
    assert "Size:        1 pod (min 1, max 1)" in text
    assert is_up(_status(1, running=0))[1] == "0/1 pod running"
    code, lines = existing_message(one, {"spec": {}}, {"spec": {}})
    assert code == 0 and "(1/1 pod ready)" in lines[0]
    assert "1 pods" not in text + "\n".join(lines)


def test_scale_says_pod_for_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from miniclusters.cli import cluster_commands

    class Scaled:
        def scale(self, _name: str, _size: int) -> ClusterStatus:
            return _status(1)

    monkeypatch.setattr(cluster_commands, "open_backend", lambda *_a, **_k: Scaled())
    result = CliRunner().invoke(main, ["scale", "m", "1"])
    assert result.exit_code == 0 and "MiniCluster m scaled to 1 pod (1 running now)" in result.output


def test_up_says_what_it_waits_for_once_not_at_every_look(capsys: pytest.CaptureFixture[str]) -> None:
    show = _progress_printer()
    waiting = "waiting for the lead broker: the lead broker is starting"
    for second in range(6):  # six looks at the same state
        show(WaitProgress(2, 2, 0, None, float(second), waiting))
    show(WaitProgress(2, 2, 2, 2, 6.0, "2 pods running, 2 brokers joined"))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith(waiting) and lines[1].endswith("2 brokers joined")
    show(WaitProgress(2, 2, 2, 2, 30.0, "2 pods running, 2 brokers joined"))  # a long wait is still reported
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_what_up_prints_names_the_options_that_find_the_cluster_again() -> None:
    """A command printed for the user to run must run as printed in a shell without $MINICLUSTER_BACKEND: the
    backend unless it is the default, the kubeconfig context if one was named, the Kubernetes namespace."""
    from miniclusters.cli.backend_options import reach_scope
    from miniclusters.cli.existing import reach_lines

    assert reach_scope("local", None, None) == ""
    assert reach_scope("podman", None, None) == "--backend podman"
    assert reach_scope("kubernetes", "kind-kind", "hpc") == "--backend kubernetes --context kind-kind -n hpc"
    assert reach_scope("kubernetes", None, "team a") == "--backend kubernetes -n 'team a'"  # quoted for the shell
    lines = reach_lines("m", None, "--backend podman")
    commands = [line.split("#")[0].strip() for line in lines]
    assert commands == [
        "minicluster status m --backend podman",
        "minicluster exec m --backend podman -- flux resource list",
        "minicluster down m --backend podman",
    ]
    assert len({line.index("#") for line in lines}) == 1  # the comments line up
    code, said = existing_message(_status(1), {"spec": {"size": 1}}, {"spec": {"size": 2}}, "--backend podman")
    assert code == 2 and "`minicluster scale m --backend podman N`" in "\n".join(said)
    assert "  minicluster down m --backend podman" in "\n".join(said)
