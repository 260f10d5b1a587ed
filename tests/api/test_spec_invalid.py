"""Invalid specs: each problem is reported with its field path, exit code 2, and nothing is printed to stdout."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from miniclusters.api import SpecError, load_minicluster
from miniclusters.cli import main

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        node: Any = data
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
        node[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value

    return mutate


def _two_runners(data: dict[str, Any]) -> None:
    data["spec"]["containers"] = [
        {"image": "a", "name": "a", "runFlux": True},
        {"image": "b", "name": "b", "runFlux": True},
    ]


def _unnamed_sidecar(data: dict[str, Any]) -> None:
    data["spec"]["containers"] = [{"image": "a", "runFlux": True}, {"image": "b"}]


CASES: list[tuple[str, Mutation, str, str]] = [
    ("wrong type", _set("spec.size", "four"), "spec.size", "valid integer"),
    ("size zero", _set("spec.size", 0), "spec.size", "greater than or equal to 1"),
    ("maxSize < size", _set("spec.maxSize", 1), "spec.maxSize", "must not be smaller than size"),
    ("minSize > size", _set("spec.minSize", 3), "spec.minSize", "must not exceed"),
    ("two runFlux", _two_runners, "spec.containers", "exactly one container must set runFlux"),
    ("unnamed non-runner", _unnamed_sidecar, "spec.containers[1].name", "needs a name"),
    ("bad name", _set("metadata.name", "My_Cluster"), "metadata.name", "DNS-1123"),
    ("name too long with index", _set("metadata.name", "a" * 62), "metadata.name", "at most 63"),
    ("unknown field", _set("spec.sizee", 3), "spec.sizee", "unknown field"),
    ("nested unknown field", _set("spec.flux.conectTimeout", "5s"), "spec.flux.conectTimeout", "unknown field"),
    (
        "bad quantity",
        _set("spec.containers.0.resources", {"requests": {"cpu": "lots"}}),
        "spec.containers[0].resources.requests.cpu",
        "not a Kubernetes quantity",
    ),
    (
        "launcher and batch",
        _set("spec.containers.0", {"image": "a", "launcher": True, "batch": True}),
        "spec.containers[0].batch",
        "cannot both be set",
    ),
    (
        "claim without path",
        _set("spec.containers.0.volumes", {"data": {"claimName": "pvc"}}),
        "spec.containers[0].volumes.data.path",
        "needs a path",
    ),
    ("bad duration", _set("spec.flux.connectTimeout", "soon"), "spec.flux.connectTimeout", "not a duration"),
    ("bad topology", _set("spec.flux.topology", "ring"), "spec.flux.topology", "not a Flux topology"),
    ("bad headless name", _set("spec.network.headlessName", "Svc!"), "spec.network.headlessName", "DNS-1123"),
    ("bad log level", _set("spec.flux.logLevel", 9), "spec.flux.logLevel", "less than or equal to 7"),
    ("bad flavour", _set("spec.flux.flavour", "slurm"), "spec.flux.flavour", "'builtin' or 'flux'"),
    (
        "request above limit",
        _set("spec.containers.0.resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
        "spec.containers[0].resources.requests.cpu",
        "larger than the limit",
    ),
    (
        "bad curve cert",
        _set("spec.flux.curveCert", 'curve\n    public-key = "x"\n'),
        "spec.flux.curveCert",
        "not a usable curve certificate",
    ),
    (
        "bad profiling boundary",
        _set("spec.profiling", {"enabled": True, "boundary": "barrier"}),
        "spec.profiling.boundary",
        "not an MPI call name",
    ),
    (
        "multiplexing without a command",
        _set("spec.multiplexing", {"enabled": True}),
        "spec.multiplexing.command",
        "required when multiplexing is enabled",
    ),
    (
        "multiplexing total below max",
        _set("spec.multiplexing", {"max": 3, "total": 2, "command": "x"}),
        "spec.multiplexing.total",
        "below max",
    ),
    (
        "multiplexing profiled together above max",
        _set("spec.multiplexing", {"max": 2, "profileTogether": 3, "command": "x"}),
        "spec.multiplexing.profileTogether",
        "3 is above max (2)",
    ),
    (
        "multiplexing ranks fewer than pods",
        _set("spec.multiplexing", {"enabled": True, "command": "x", "ranks": 1}),
        "spec.multiplexing.ranks",
        "cannot span the 2 pods",
    ),
    ("bad restart policy", _set("spec.pod.restartPolicy", "Always"), "spec.pod.restartPolicy", "'OnFailure'"),
    (
        "unknown burst plugin",
        _set("spec.flux.bursting", {"plugins": [{"name": "local", "size": 2}, {"name": "gcp", "size": 1}]}),
        "spec.flux.bursting.plugins[1].name",
        "'gcp' is not an installed burst plugin (local, kubernetes)",
    ),
    (
        "burst plugins with the flux flavour",
        lambda data: (
            data["spec"]
            .setdefault("flux", {})
            .update({"flavour": "flux", "bursting": {"plugins": [{"name": "local", "size": 1}]}})
        ),
        "spec.flux.bursting.plugins",
        "builtin broker only",
    ),
    (
        "unnamed burst plugin",
        _set("spec.flux.bursting", {"plugins": [{"size": 1}]}),
        "spec.flux.bursting.plugins[0].name",
        "required field is missing",
    ),
    (
        "empty burst plugin name",
        _set("spec.flux.bursting", {"plugins": [{"name": ""}]}),
        "spec.flux.bursting.plugins[0].name",
        "empty: it must be an installed burst plugin",
    ),
    (
        "burst plugins beside a custom hostlist",
        _set("spec.flux.bursting", {"hostlist": "demo-[0-1],far-0", "plugins": [{"name": "local"}]}),
        "spec.flux.bursting.plugins",
        "a custom hostlist replaces the pods",
    ),
    (
        "bursted clusters beside a custom hostlist (the operator's rule)",
        _set("spec.flux.bursting", {"hostlist": "demo-[0-1],far-0", "clusters": [{"name": "far"}]}),
        "spec.flux.bursting",
        "give either a custom hostlist or clusters to burst to, not both",
    ),
    (
        "a bursted cluster named like the MiniCluster (its hosts would be the pods')",
        _set("spec.flux.bursting", {"clusters": [{"name": "demo", "size": 2}]}),
        "spec.flux.bursting.clusters[0].name",
        "'demo': its hosts 'demo-<i>' are already those of the pods (metadata.name)",
    ),
    (
        "two bursted clusters of one name (burst-1 is the second's default)",
        _set("spec.flux.bursting", {"clusters": [{"name": "burst-1"}, {}]}),
        "spec.flux.bursting.clusters[1].name",
        "'burst-1': its hosts 'burst-1-<i>' are already those of spec.flux.bursting.clusters[0]",
    ),
    (
        "a bursted cluster whose name is no hostname",
        _set("spec.flux.bursting", {"clusters": [{"name": "Burst_0", "size": 2}]}),
        "spec.flux.bursting.clusters[0].name",
        "DNS-1123",
    ),
    (
        "our spec naming a plugin where the operator names a bursted cluster",
        _set("spec.flux.bursting", {"clusters": [{"name": "local", "size": 2}]}),
        "spec.flux.bursting.clusters[0].name",
        "to burst with the plugin write spec.flux.bursting.plugins: [{name: local, size: 2}]",
    ),
]


@pytest.mark.parametrize(("label", "mutate", "path", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_invalid_spec_is_reported_with_its_path(
    tmp_path: Path, minimal_spec: dict, label: str, mutate: Mutation, path: str, fragment: str
) -> None:
    mutate(minimal_spec)
    with pytest.raises(SpecError) as caught:
        load_minicluster(minimal_spec)
    matching = [p for p in caught.value.problems if p.path == path]
    assert matching, f"{label}: no problem at {path}: {caught.value.problems}"
    assert any(fragment in p.message for p in matching), matching

    spec_file = tmp_path / "bad.yaml"
    spec_file.write_text(yaml.safe_dump(minimal_spec))
    result = CliRunner().invoke(main, ["validate", str(spec_file)])
    assert result.exit_code == 2
    assert path in result.stderr and fragment in result.stderr
    assert result.stdout == ""
    render = CliRunner().invoke(main, ["render", str(spec_file)])
    assert render.exit_code == 2 and render.stdout == ""


def test_every_problem_is_listed_at_once(minimal_spec: dict) -> None:
    spec = minimal_spec["spec"]
    spec.update({"size": "x", "maxSize": 1, "minSize": 9, "bogus": True})
    minimal_spec["metadata"]["name"] = "Bad"
    spec["containers"].append({"image": "b", "launcher": True, "batch": True})
    with pytest.raises(SpecError) as caught:
        load_minicluster(minimal_spec)
    paths = {p.path for p in caught.value.problems}
    # type errors and cross-field rule violations together, each once
    assert {"spec.size", "spec.bogus", "metadata.name", "spec.minSize", "spec.containers[1].batch"} <= paths
    assert len(caught.value.problems) == len(set(caught.value.problems))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("spec: [unclosed", "not valid YAML at line 1"),
        ("", "found 0"),
        ("a: 1\n---\nb: 2\n", "found 2"),
        ("- just\n- a list\n", "expected a MiniCluster mapping"),
        (
            "apiVersion: flux-framework.org/v1alpha1\nkind: MiniCluster\nmetadata: {name: x}\nspec: {containers: [{}]}",
            "apiVersion",
        ),
    ],
)
def test_unreadable_documents(tmp_path: Path, text: str, fragment: str) -> None:
    spec_file = tmp_path / "doc.yaml"
    spec_file.write_text(text)
    result = CliRunner().invoke(main, ["validate", str(spec_file)])
    assert result.exit_code == 2
    assert fragment in result.stderr


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "cannot read file" in result.stderr


def test_console_script_exit_code(tmp_path: Path, minimal_spec: dict) -> None:
    minimal_spec["spec"]["maxSize"] = 1
    spec_file = tmp_path / "bad.yaml"
    spec_file.write_text(yaml.safe_dump(minimal_spec))
    exe = Path(sys.executable).with_name("minicluster")
    proc = subprocess.run([str(exe), "validate", str(spec_file)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "spec.maxSize" in proc.stderr


@pytest.mark.parametrize(
    "spec",
    [
        {"size": 2, "containers": [5]},  # a list item that cannot be set aside
        {"size": 2},  # a required field missing
        {"size": 2, "containers": "not-a-list"},
    ],
)
def test_bad_names_come_in_the_same_report_as_type_errors(spec: dict[str, Any]) -> None:
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "Bad_Name", "namespace": "Also_Bad"},
        "spec": spec,
    }
    with pytest.raises(SpecError) as caught:
        load_minicluster(data)
    paths = [problem.path for problem in caught.value.problems]
    assert "metadata.name" in paths and "metadata.namespace" in paths, paths
    assert any(path.startswith("spec.containers") for path in paths), paths


@pytest.mark.parametrize(
    ("spec", "refused", "not_said"),
    [
        ({"tasks": 0, "size": 2, "placement": {"policy": "granularity"}}, "spec.tasks", "tasks (1)"),
        ({"tasks": "x", "size": 3, "multiplexing": {"enabled": True, "command": "x"}}, "spec.tasks", "1 rank(s)"),
        ({"size": 0, "maxSize": 3, "minSize": 2}, "spec.size", "size (1)"),
    ],
)
def test_a_refused_value_is_not_judged_by_the_default_standing_in_for_it(
    minimal_spec: dict, spec: dict[str, Any], refused: str, not_said: str
) -> None:
    """The value given is refused for what it is (naming it); no cross-field rule reports the default that stood
    in for it while the rest was checked ("tasks (1) is below size" for tasks: 0)."""
    minimal_spec["spec"].update(spec)
    with pytest.raises(SpecError) as caught:
        load_minicluster(minimal_spec)
    said = [str(p) for p in caught.value.problems]
    assert [p.path for p in caught.value.problems if p.path == refused] == [refused]
    assert any(f"(got {spec[refused.split('.')[-1]]!r})" in line for line in said), said
    assert not any(not_said in line for line in said), said
