"""The entrypoint script, run for real by bash with a `flux` on PATH that records how it was called."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from miniclusters.api import load_minicluster
from miniclusters.render.entrypoint import render_entrypoint

FAKE_FLUX = """#!/bin/bash
# Records each call (one line, shell-quoted words) and exits with $FAKE_FLUX_RC.
printf '%q ' "$@" >> "$FAKE_FLUX_LOG"; echo >> "$FAKE_FLUX_LOG"
[ "$1" = start ] && sleep "${FAKE_FLUX_START_SECONDS:-0}"
exit "${FAKE_FLUX_RC:-0}"
"""


def run_entrypoint(
    tmp_path: Path, spec: dict[str, Any], index: int, rc: int = 0, **extra_env: str
) -> tuple[int, list[list[str]], str]:
    script = tmp_path / "entrypoint.sh"
    script.write_text(render_entrypoint(load_minicluster(spec)))
    broker_dir = tmp_path / "broker"
    (broker_dir / "bin").mkdir(parents=True, exist_ok=True)
    fake = broker_dir / "bin" / "flux"
    fake.write_text(FAKE_FLUX)
    fake.chmod(0o755)
    log = tmp_path / f"flux-{index}.log"
    env = {
        "PATH": os.environ["PATH"],
        "JOB_COMPLETION_INDEX": str(index),
        "MINICLUSTER_CONFIG_DIR": str(tmp_path / "config"),
        "MINICLUSTER_RUN_DIR": str(tmp_path / "run"),
        "MINICLUSTER_BROKER_DIR": str(broker_dir),
        "FAKE_FLUX_LOG": str(log),
        "FAKE_FLUX_RC": str(rc),
        **extra_env,
    }
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    calls = [shlex.split(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc.returncode, calls, proc.stderr


def _options(call: list[str]) -> list[str]:
    return call[call.index("-o") + 1].split(",")


def test_lead_submits_the_command_and_returns_its_exit_code(tmp_path: Path, minimal_spec: dict) -> None:
    minimal_spec["spec"].update({"size": 2, "tasks": 4, "minSize": 1})
    minimal_spec["spec"]["containers"][0]["command"] = "mpi-hello --verbose"
    rc, calls, stderr = run_entrypoint(tmp_path, minimal_spec, index=0, rc=3)
    assert rc == 3, stderr
    (call,) = calls
    assert call[:2] == ["start", "-o"]
    options = _options(call)
    assert f"--config-path={tmp_path / 'config'}" in options
    assert "-Sbroker.quorum=1" in options and "-Stbon.connect_timeout=5s" in options
    assert call[3:] == ["flux", "submit", "-N", "2", "-n", "4", "--watch", "mpi-hello", "--verbose"]
    assert (tmp_path / "run" / "rundir").is_dir()
    assert f"-Sstatedir={tmp_path / 'run' / 'state'}" in options and (tmp_path / "run" / "state").is_dir()


def test_follower_only_starts_its_broker(tmp_path: Path, minimal_spec: dict) -> None:
    rc, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=1)
    assert rc == 0
    (call,) = calls
    assert call[:2] == ["start", "-o"] and len(call) == 3


def test_complete_workers_turns_a_failed_follower_into_success(tmp_path: Path, minimal_spec: dict) -> None:
    rc, _, _ = run_entrypoint(tmp_path, minimal_spec, index=1, rc=1)
    assert rc == 1
    minimal_spec["spec"]["flux"] = {"completeWorkers": True}
    rc, _, _ = run_entrypoint(tmp_path, minimal_spec, index=1, rc=1)
    assert rc == 0


def test_fewer_tasks_than_nodes_passes_only_n(tmp_path: Path, minimal_spec: dict) -> None:
    minimal_spec["spec"].update({"size": 4, "tasks": 2})
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    assert calls[0][3:8] == ["flux", "submit", "-n", "2", "--watch"]


def test_interactive_lead_keeps_brokers_up(tmp_path: Path, minimal_spec: dict) -> None:
    """No initial program (broker.rc2_none), so a clean `flux shutdown` ends the lead with 0 in both flavours."""
    minimal_spec["spec"]["interactive"] = True
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    assert len(calls[0]) == 3 and "-Sbroker.rc2_none=1" in _options(calls[0])
    _, follower, _ = run_entrypoint(tmp_path, minimal_spec, index=1)
    assert "-Sbroker.rc2_none=1" not in _options(follower[0])
    minimal_spec["spec"]["interactive"] = False
    (tmp_path / "again").mkdir()
    _, calls, _ = run_entrypoint(tmp_path / "again", minimal_spec, index=0)
    assert "-Sbroker.rc2_none=1" not in _options(calls[0])


def test_launcher_runs_the_command_directly(tmp_path: Path, minimal_spec: dict) -> None:
    minimal_spec["spec"]["containers"][0].update({"launcher": True, "command": "my-launcher arg"})
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    assert calls[0][3:] == ["my-launcher", "arg"]


def test_batch_writes_a_script_and_submits_it(tmp_path: Path, minimal_spec: dict) -> None:
    minimal_spec["spec"]["containers"][0].update({"batch": True, "command": "echo one\necho two"})
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    batch = (tmp_path / "run" / "batch.sh").read_text()
    assert batch.splitlines()[1:] == ["echo one", "echo two"]
    assert calls[0][3:5] == ["bash", "-c"] and "flux batch -N 2" in calls[0][5]


def test_commands_run_in_order_per_role(tmp_path: Path, minimal_spec: dict) -> None:
    trace = tmp_path / "trace"
    minimal_spec["spec"]["containers"][0]["commands"] = {
        step: f"echo {step} >> {trace}" for step in ("init", "pre", "brokerPre", "workerPre", "post")
    }
    run_entrypoint(tmp_path, minimal_spec, index=0)
    assert trace.read_text().split() == ["init", "brokerPre", "pre", "post"]
    trace.unlink()
    run_entrypoint(tmp_path, minimal_spec, index=1)
    assert trace.read_text().split() == ["init", "workerPre", "pre", "post"]


def test_archive_restores_when_present_and_always_dumps(tmp_path: Path, minimal_spec: dict) -> None:
    archive = tmp_path / "archive.tar"
    minimal_spec["spec"]["archive"] = {"path": str(archive)}
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    assert f"-Scontent.dump={archive}" in _options(calls[0])
    assert not any(o.startswith("-Scontent.restore") for o in _options(calls[0]))
    archive.write_text("x")
    (tmp_path / "flux-0.log").unlink()
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    assert f"-Scontent.restore={archive}" in _options(calls[0])


def test_strict_mode_stops_at_the_first_failing_command(tmp_path: Path, minimal_spec: dict) -> None:
    minimal_spec["spec"]["logging"] = {"strict": True}
    minimal_spec["spec"]["containers"][0]["commands"] = {"pre": "false"}
    rc, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    assert rc != 0 and calls == []


@pytest.mark.parametrize("index", ["", None])
def test_outside_an_indexed_job_it_refuses(tmp_path: Path, minimal_spec: dict, index: str | None) -> None:
    script = tmp_path / "e.sh"
    script.write_text(render_entrypoint(load_minicluster(minimal_spec)))
    env = {"PATH": os.environ["PATH"]}
    if index is not None:
        env["JOB_COMPLETION_INDEX"] = index
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "JOB_COMPLETION_INDEX" in proc.stderr


def test_elastic_spec_is_online_at_size_not_max_size(tmp_path: Path, minimal_spec: dict) -> None:
    """Hosts up to maxSize are pre-registered but may never start: the quorum must not wait for them."""
    minimal_spec["spec"].update({"size": 2, "maxSize": 8})
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=1)
    options = _options(calls[0])
    assert "-Sbroker.quorum=2" in options
    assert f"-Srundir={tmp_path / 'run' / 'rundir'}" in options  # Flux's attribute name (not broker.rundir)


def test_profiling_spec_adds_the_pmpi_job_options(tmp_path: Path, minimal_spec: dict) -> None:
    minimal_spec["spec"]["profiling"] = {"enabled": True, "iterations": 50, "boundary": "MPI_Allreduce"}
    minimal_spec["spec"]["containers"][0]["command"] = "rhoSimpleFoam -parallel"
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    submit = calls[0][3:]
    assert submit[:2] == ["flux", "submit"]
    assert submit[submit.index("pmpi=50") - 1 : submit.index("pmpi=50") + 1] == ["-o", "pmpi=50"]
    assert "pmpi-boundary=MPI_Allreduce" in submit and submit[-2:] == ["rhoSimpleFoam", "-parallel"]


@pytest.mark.parametrize("socket_name", ["local-0", "local"])
def test_flux_flavour_lead_starts_the_rest_server_on_the_broker_socket(
    tmp_path: Path, minimal_spec: dict, socket_name: str
) -> None:
    """The server runs beside the broker once its socket exists, under either layout (flux-core 0.88: local-0)."""
    import socket

    view = tmp_path / "fv"
    (view / "view" / "bin").mkdir(parents=True)
    (view / "view" / "bin" / "flux").write_text(FAKE_FLUX)  # real flux-core's place in the flux flavour
    (view / "view" / "bin" / "flux").chmod(0o755)
    python = tmp_path / "python"  # records how the REST server would have been started
    python.write_text(f'#!/bin/bash\necho "$FLUX_URI $*" > {tmp_path / "server"}\n')
    python.chmod(0o755)
    minimal_spec["spec"]["flux"] = {"flavour": "flux", "container": {"mountPath": str(view)}}
    minimal_spec["spec"]["restful"] = {"enabled": True, "port": 5001}
    minimal_spec["spec"]["containers"][0]["command"] = "echo 'it works'"
    (tmp_path / "run" / "rundir").mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "run" / "rundir" / socket_name))
    try:
        rc, calls, stderr = run_entrypoint(
            tmp_path, minimal_spec, index=0, MINICLUSTER_PYTHON=str(python), FAKE_FLUX_START_SECONDS="1"
        )
    finally:
        listener.close()
    assert rc == 0, stderr
    start = next(c for c in calls if c[0] == "start")  # (the first call is `flux R encode`)
    assert start[3:] == ["flux", "submit", "-n", "1", "--watch", "echo", "it works"]
    assert "-Srestful.port=5001" not in _options(start)  # flux-core does not start it; the pod does
    uri, *argv = (tmp_path / "server").read_text().split()
    assert uri == f"local://{tmp_path / 'run' / 'rundir' / socket_name}"
    state = str(tmp_path / "run" / "state" / "restful")  # beside the journal, as the built-in lead keeps it
    assert argv == ["-m", "broker.rest.server", "--flavour", "flux", "--port", "5001", "--state-dir", state]
    (tmp_path / "server").unlink()
    run_entrypoint(tmp_path, minimal_spec, index=1, MINICLUSTER_PYTHON=str(python))
    assert not (tmp_path / "server").exists()  # followers only run brokers


def test_builtin_lead_restores_the_queue_archive_checked_against_its_name(tmp_path: Path, minimal_spec: dict) -> None:
    archive = tmp_path / "queue.tar.gz"
    archive.write_text("x")
    minimal_spec["spec"]["archive"] = {"path": str(archive), "unfit": "reject"}
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=0)
    options = _options(calls[0])
    assert f"-Scontent.restore={archive}" in options
    assert "-Sjob-manager.restore-unfit=reject" in options
    assert f"-Sjob-manager.restore-cluster={minimal_spec['metadata']['name']}" in options
    (tmp_path / "flux-1.log").unlink(missing_ok=True)
    _, calls, _ = run_entrypoint(tmp_path, minimal_spec, index=1)
    assert not any(o.startswith(("-Scontent.", "-Sjob-manager.")) for o in _options(calls[0]))  # no queue there


def _flux_flavour(tmp_path: Path, spec: dict, fake: str) -> None:
    view = tmp_path / "fv"
    (view / "view" / "bin").mkdir(parents=True, exist_ok=True)
    (view / "view" / "bin" / "flux").write_text(fake)
    (view / "view" / "bin" / "flux").chmod(0o755)
    spec["spec"]["flux"] = {"flavour": "flux", "container": {"mountPath": str(view)}}


def test_flux_flavour_lead_gives_flux_modprobe_the_lead_restart_task(tmp_path: Path, minimal_spec: dict) -> None:
    """flux-core's rc1 finds the task through $FLUX_MODPROBE_PATH_APPEND: rc1.d/*.py under the pod's run dir."""
    from miniclusters.render.lead_restart import RC1_TASK, TASK_FILE

    seen = tmp_path / "modprobe-path"
    _flux_flavour(
        tmp_path, minimal_spec, f'#!/bin/bash\n[ "$1" = start ] && echo "$FLUX_MODPROBE_PATH_APPEND" > {seen}\n'
    )
    rc, _, stderr = run_entrypoint(tmp_path, minimal_spec, index=0, FLUX_MODPROBE_PATH_APPEND="/site")
    assert rc == 0, stderr
    first, rest = seen.read_text().strip().split(":", 1)
    assert (Path(first) / "rc1.d" / TASK_FILE).read_text().rstrip("\n") == RC1_TASK.rstrip("\n")
    assert rest == "/site"  # a path the image set is kept
    seen.unlink()
    minimal_spec["spec"]["flux"]["flavour"] = "builtin"
    run_entrypoint(tmp_path, minimal_spec, index=0)
    assert "FLUX_MODPROBE_PATH_APPEND" not in render_entrypoint(load_minicluster(minimal_spec))  # builtin: no rc1
