"""Save and restore on the Kubernetes backend, over the fake API: the archive lives on the claim named in
spec.archive, `save` asks the lead pod's broker to write it there, `up --restore` renders the restore."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from broker.refused import EXIT_REFUSED, refusal_line
from miniclusters import backends
from miniclusters.backends.base import ExecResult
from miniclusters.backends.kubernetes.api import CONFIG_MAP, JOB
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.cli import main
from miniclusters.kube_shapes import Pod
from miniclusters.testing.fake_exec import default_exec
from miniclusters.testing.fake_kube import FakeKube

ARCHIVE = "/archive/queue.tar.gz"


@pytest.fixture
def cli(fake: FakeKube, clock: Any, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    def factory(**options: Any) -> KubernetesBackend:
        options.pop("context", None)
        return KubernetesBackend(api=fake, clock=clock, sleep=clock.sleep, **options)

    monkeypatch.setitem(backends._REGISTRY, "kubernetes", factory)
    monkeypatch.setenv("MINICLUSTER_BACKEND", "kubernetes")
    return CliRunner()


def test_save_in_the_lead_pod_and_restore_from_the_claim(
    cli: CliRunner, fake: FakeKube, tmp_path: Path, spec_data: dict[str, Any]
) -> None:
    spec_data["spec"]["archive"] = {"path": ARCHIVE, "claimName": "queue-archive", "unfit": "reject"}
    spec = tmp_path / "demo.yaml"
    spec.write_text(yaml.safe_dump(spec_data))
    assert cli.invoke(main, ["up", str(spec), "--detach"]).exit_code == 0
    asked: list[tuple[str, list[str]]] = []

    def lead(fake: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        if "save" in argv:
            asked.append((pod["metadata"]["name"], argv))
            answer = {"path": ARCHIVE, "cluster": "demo", "jobs": 5, "pending": 3, "requeued": 1, "inactive": 2}
            return ExecResult(0, json.dumps(answer) + "\n", "")
        return default_exec(fake, pod, argv)

    fake.exec_handler = lead
    saved = cli.invoke(main, ["save", "demo", ARCHIVE])
    assert saved.exit_code == 0, saved.output
    assert "5 jobs (3 to run after the restore, 1 of them requeued by the save, 2 done)" in saved.stdout
    ((pod, argv),) = asked
    assert pod.startswith("demo-0-") and argv[-5:] == ["queue", "save", "--cluster=demo", "--timeout=600s", ARCHIVE]
    relative = cli.invoke(main, ["save", "demo", "queue.tar.gz"])
    assert relative.exit_code == 2 and "absolute path inside the lead pod" in relative.stderr
    assert cli.invoke(main, ["down", "demo"]).exit_code == 0

    # A new MiniCluster of another size on the same claim restores what the old one wrote.
    spec_data["spec"]["size"] = 1
    spec.write_text(yaml.safe_dump(spec_data))
    restored = cli.invoke(main, ["up", str(spec), "--detach", "--restore", ARCHIVE, "--restore-unfit", "wait"])
    assert restored.exit_code == 0, restored.output
    assert f"{ARCHIVE} is checked by the lead broker when it starts" in restored.stderr
    job = fake.stored(JOB, "demo")
    kubernetes_validate.validate(job, "1.33", strict=True)
    template = job["spec"]["template"]["spec"]
    assert {"name": "mc-archive", "persistentVolumeClaim": {"claimName": "queue-archive"}} in template["volumes"]
    runner = next(c for c in template["containers"] if any(m["name"] == "mc-archive" for m in c["volumeMounts"]))
    assert {"name": "mc-archive", "mountPath": "/archive"} in runner["volumeMounts"]
    (config,) = fake.all_of(CONFIG_MAP)
    entrypoint = next(v for v in config["data"].values() if "flux start" in v)
    assert f"-Scontent.restore={ARCHIVE}" in entrypoint and "-Sjob-manager.restore-unfit=wait" in entrypoint


def test_a_lead_that_refuses_the_archive_fails_up_at_once_with_its_reason(
    cli: CliRunner, fake: FakeKube, clock: Any, tmp_path: Path, spec_data: dict[str, Any]
) -> None:
    """The archive is in the lead pod (not readable here): the lead refuses it, exits EXIT_REFUSED and the
    kubelet keeps its log's tail as the termination message; `up` says so at once instead of waiting 600 s."""
    spec_data["spec"]["archive"] = {"path": ARCHIVE, "claimName": "queue-archive"}
    spec = tmp_path / "demo.yaml"
    spec.write_text(yaml.safe_dump(spec_data))
    reason = f"content.restore: {ARCHIVE}: archive member 'output/../../etc/x' climbs out of its directory"

    def lead(fake: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        if pod["metadata"]["name"].startswith("demo-0-") and "overlay" in argv:
            name = pod["metadata"]["name"]
            fake.pod_logs[name] = ["[demo-0] lead broker starting", refusal_line(reason), "[demo-0] exiting with 78"]
            fake.crash_container("demo", 0, EXIT_REFUSED)
            return ExecResult(1, "", "flux-overlay: cannot reach the broker\n")
        return default_exec(fake, pod, argv)

    fake.exec_handler = lead
    started = clock.now
    result = cli.invoke(main, ["up", str(spec), "--detach", "--restore", ARCHIVE, "--timeout", "600"])
    assert result.exit_code == 2, result.output
    down = "minicluster down demo --backend kubernetes -n hpc"  # as printed: it finds the cluster again
    assert f"(index 0) refused to start: {reason}; remove it with `{down}`" in result.stderr
    assert clock.now - started < 30  # two polls, not the timeout
    runner = fake.stored(JOB, "demo")["spec"]["template"]["spec"]["containers"][0]
    assert runner["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_restore_into_an_existing_cluster_is_refused_before_the_archive_is_read(
    cli: CliRunner, fake: FakeKube, tmp_path: Path, spec_data: dict[str, Any]
) -> None:
    spec_data["spec"]["archive"] = {"path": ARCHIVE, "claimName": "queue-archive"}
    spec = tmp_path / "demo.yaml"
    spec.write_text(yaml.safe_dump(spec_data))
    assert cli.invoke(main, ["up", str(spec), "--detach"]).exit_code == 0
    unreadable = tmp_path / "queue.tar.gz"  # here, so the CLI would read it first
    unreadable.write_text("not an archive")
    before = len(fake.writes())
    result = cli.invoke(main, ["up", str(spec), "--detach", "--restore", str(unreadable)])
    assert result.exit_code == 2, result.output
    assert "--restore: MiniCluster 'demo' already exists: a queue is restored into a new cluster only" in result.stderr
    assert "not a readable tar archive" not in result.stderr
    assert len(fake.writes()) == before  # nothing changed
