"""The cluster commands end to end over the fake API: messages, exit codes, nothing changed on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from miniclusters import backends
from miniclusters.backends.kubernetes.api import JOB
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.cli import main
from miniclusters.testing.fake_kube import FakeKube


@pytest.fixture
def cli(fake: FakeKube, clock, monkeypatch) -> CliRunner:
    def factory(**options):
        options.pop("context", None)
        return KubernetesBackend(api=fake, clock=clock, sleep=clock.sleep, **options)

    monkeypatch.setitem(backends._REGISTRY, "kubernetes", factory)
    monkeypatch.setenv("MINICLUSTER_BACKEND", "kubernetes")
    return CliRunner()


@pytest.fixture
def spec_file(tmp_path: Path, spec_data: dict) -> Path:
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(spec_data))
    return path


def test_up_status_scale_resize_exec_list_down(cli: CliRunner, fake: FakeKube, spec_file: Path) -> None:
    result = cli.invoke(main, ["up", str(spec_file)])
    assert result.exit_code == 0, result.output
    assert "brokers joined 2/2" in result.stderr and "2 pods (min 1, max 6)" in result.stdout
    status = cli.invoke(main, ["status", "demo", "-o", "json"])
    assert json.loads(status.stdout)["ranks_up"] == [0, 1]
    assert cli.invoke(main, ["scale", "demo", "4"]).exit_code == 0
    assert fake.stored(JOB, "demo")["spec"]["completions"] == 4
    resize = cli.invoke(main, ["resize", "demo", "1", "--cpu", "250m"])
    assert resize.exit_code == 0 and "done" in resize.stdout
    infeasible = cli.invoke(main, ["resize", "demo", "1", "--cpu", "100"])
    assert infeasible.exit_code == 1 and "infeasible" in infeasible.stdout
    run = cli.invoke(main, ["exec", "demo", "-i", "2", "--", "hostname"])
    assert run.exit_code == 0 and run.stdout == "demo-2\n"
    assert "demo" in cli.invoke(main, ["list"]).stdout
    assert cli.invoke(main, ["down", "demo"]).exit_code == 0
    gone = cli.invoke(main, ["down", "demo"])
    assert gone.exit_code == 1 and "not found" in gone.stderr


def test_bad_input_exits_non_zero_and_changes_nothing(
    cli: CliRunner, fake: FakeKube, spec_file: Path, spec_data: dict
) -> None:
    cli.invoke(main, ["up", str(spec_file)])
    writes = len(fake.writes())
    out_of_range = cli.invoke(main, ["scale", "demo", "7"])
    assert out_of_range.exit_code == 2 and "maxSize=6" in out_of_range.stderr
    bad_cpu = cli.invoke(main, ["resize", "demo", "1", "--cpu", "fast"])
    assert bad_cpu.exit_code == 2 and "--cpu" in bad_cpu.stderr
    assert len(fake.writes()) == writes
    bad_spec = spec_file.with_name("bad.yaml")
    spec_data["spec"]["maxSize"] = 1
    bad_spec.write_text(yaml.safe_dump(spec_data))
    invalid = cli.invoke(main, ["up", str(bad_spec)])
    assert invalid.exit_code == 2 and "maxSize" in invalid.stderr


def test_missing_crd_and_unknown_backend(cli: CliRunner, fake: FakeKube, spec_file: Path) -> None:
    fake.crd_installed = False
    missing = cli.invoke(main, ["up", str(spec_file)])
    assert missing.exit_code == 1 and "CRD" in missing.stderr and "Traceback" not in missing.output
    unknown = cli.invoke(main, ["list", "--backend", "nope"])
    assert unknown.exit_code == 2 and "available: kubernetes, local" in unknown.stderr


@pytest.mark.parametrize(
    "command", ["up", "down", "status", "scale", "resize", "logs", "exec", "list", "operator", "manifests"]
)
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "Example:" in result.stdout


def test_up_of_a_campaign_without_a_shared_workdir_is_refused_before_anything_exists(
    cli: CliRunner, fake: FakeKube, tmp_path: Path
) -> None:
    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples" / "naca0012-campaign.yaml").read_text())
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = cli.invoke(main, ["up", str(path)])
    assert result.exit_code == 2, result.output
    assert "spec.campaign.workdir" in result.stderr and "share" in result.stderr
    assert fake.writes() == []  # nothing applied: no MiniCluster, no Job


def test_the_commands_up_prints_reach_the_cluster_as_printed(
    cli: CliRunner, spec_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up --backend kubernetes -n hpc` of an interactive cluster prints how to reach it: each command names the
    backend and namespace, so it runs as printed in a shell without $MINICLUSTER_BACKEND (a bare `status NAME`
    asked the local backend, or the context's namespace)."""
    monkeypatch.delenv("MINICLUSTER_BACKEND")
    up = cli.invoke(main, ["up", str(spec_file), "--backend", "kubernetes", "-n", "hpc", "--interactive"])
    assert up.exit_code == 0, up.output
    printed = [line.split("#")[0].split() for line in up.stdout.splitlines() if line.startswith("  minicluster ")]
    status, _exec, down = printed
    assert status == ["minicluster", "status", "demo", "--backend", "kubernetes", "-n", "hpc"]
    shown = cli.invoke(main, status[1:])
    assert shown.exit_code == 0 and "Namespace:   hpc" in shown.stdout, shown.output
    assert cli.invoke(main, down[1:]).exit_code == 0


def test_a_namespace_that_does_not_exist_is_named_with_the_command_that_creates_it() -> None:
    """The real API server's refusal of a create into a missing namespace (NamespaceLifecycle), word for word as
    tests/e2e/test_e2e_readme.py sees it; any other 404 keeps the server's words."""
    from miniclusters.backends.kubernetes.api import ApiError
    from miniclusters.backends.kubernetes.core import explain

    missing = explain(ApiError(404, "NotFound", 'namespaces "hpc" not found'), "applying MiniCluster 'elastic'")
    assert str(missing) == (
        "applying MiniCluster 'elastic': namespace 'hpc' does not exist: create it first "
        "(kubectl create namespace hpc), or choose another with --namespace"
    )
    other = explain(ApiError(404, "NotFound", 'pods "elastic-0" not found'), "reading pod 0")
    assert str(other) == 'reading pod 0: pods "elastic-0" not found'


def test_up_of_a_cluster_that_has_finished_starts_nothing_and_says_how_to_run_it_again(
    cli: CliRunner, fake: FakeKube, spec_file: Path
) -> None:
    """Applying a finished MiniCluster again runs nothing (its Job is complete): `up` printed the old run's output
    and exit code as if it were new (seen on the real cluster); it now refuses, as the local backend does."""
    assert cli.invoke(main, ["up", str(spec_file), "--detach"]).exit_code == 0
    fake.stored(JOB, "demo")["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    writes = len(fake.writes())
    again = cli.invoke(main, ["up", str(spec_file)])
    assert again.exit_code == 1, again.output
    assert "MiniCluster 'demo' already exists in namespace 'hpc' and has finished (completed)" in again.stderr
    assert "`minicluster down demo --backend kubernetes -n hpc`" in again.stderr
    assert len(fake.writes()) == writes  # nothing applied
