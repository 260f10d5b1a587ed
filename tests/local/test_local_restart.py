"""A follower whose broker dies is restarted in place as the same rank, its old tasks killed, within the Job's
backoffLimit; completeWorkers and the lead are never restarted; RESTARTS shows in status (text and JSON)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from miniclusters.backends.local.backend import LocalBackend
from miniclusters.testing.pod_processes import broker_of, session_processes
from tests.waiting import holds_for

pytestmark = pytest.mark.needs_root

FAST = {"MINICLUSTERS_LOCAL_RESTART_DELAY": "0.2"}


def _spec(directory: Path, name: str, **extra: Any) -> Path:
    spec: dict[str, Any] = {
        "size": 2,
        "interactive": True,
        "containers": [{"image": "local", "resources": {"requests": {"cpu": "250m"}}}],
    }
    flux = extra.pop("flux", None)
    if flux:
        spec["flux"] = flux
    spec.update(extra)
    data = {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": name}, "spec": spec}
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _status(mc: Any, name: str) -> dict[str, Any]:
    result = mc("status", name, "-o", "json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_follower_whose_broker_dies_restarts_as_the_same_rank_within_backoff_limit(
    mc: Any, machine: Any, backend: LocalBackend, waiter: Any
) -> None:
    spec = _spec(machine.state_dir, "rs", backoffLimit=1)
    assert mc("up", str(spec), "--detach", env=FAST).returncode == 0
    supervisor = backend.store.load("rs").pods[1].pid
    assert supervisor is not None
    assert mc("exec", "rs", "--", "flux", "submit", "-N2", "-n2", "sleep", "300").returncode == 0
    tasks = waiter(lambda: [p for p, cmd in session_processes(supervisor) if cmd.startswith("sleep 300")], timeout=15)
    assert tasks, "the job's task never started in pod 1"

    os.kill(broker_of(supervisor), signal.SIGKILL)
    back = waiter(
        lambda: (s := _status(mc, "rs"))["pods"][1]["restarts"] == 1 and s["pods"][1]["ready"] and s, timeout=30
    )
    assert back, _status(mc, "rs")
    assert back["pods"][1]["phase"] == "Running" and back["ranks_up"] == [0, 1]
    assert backend.store.load("rs").pods[1].pid == supervisor  # the same pod, restarted in place
    assert [p.restarts for p in backend.observe("rs").pods] == [0, 1]  # the loops' view counts it too
    assert not any(_alive(p) for p in tasks), "the dead broker's task still runs"
    text = mc("status", "rs").stdout
    assert "RESTARTS" in text and any(
        line.split()[0] == "rs-1" and line.split()[3] == "1" for line in text.splitlines() if line.startswith("rs-")
    ), text
    ranks = mc("exec", "rs", "-i", "1", "--", "flux", "getattr", "rank")
    assert ranks.returncode == 0 and ranks.stdout.strip() == "1"

    # the second failure exceeds backoffLimit 1: the pod stays Failed and status says why
    os.kill(broker_of(supervisor), signal.SIGKILL)
    failed = waiter(lambda: (s := _status(mc, "rs"))["pods"][1]["phase"] == "Failed" and s, timeout=20)
    assert failed, _status(mc, "rs")
    assert failed["pods"][1]["reason"] == "BackoffLimitExceeded" and failed["pods"][1]["restarts"] == 1
    assert any(c["type"] == "Failed" and c["reason"] == "BackoffLimitExceeded" for c in failed["conditions"])
    assert failed["pods"][0]["phase"] == "Running" and failed["pods"][0]["restarts"] == 0


def test_complete_workers_do_not_restart_and_an_interactive_lead_does(
    mc: Any, machine: Any, backend: LocalBackend, waiter: Any
) -> None:
    spec = _spec(machine.state_dir, "cw", flux={"completeWorkers": True})
    assert mc("up", str(spec), "--detach", env=FAST).returncode == 0
    supervisor = backend.store.load("cw").pods[1].pid
    assert supervisor is not None
    os.kill(broker_of(supervisor), signal.SIGKILL)
    done = waiter(lambda: (s := _status(mc, "cw"))["pods"][1]["phase"] == "Succeeded" and s, timeout=20)
    assert done, _status(mc, "cw")
    holds_for(  # well past the back-off
        "the completed worker stays Succeeded, not restarted",
        lambda: (
            (pod := _status(mc, "cw")["pods"][1])["phase"] == "Succeeded"
            and pod["restarts"] == 0
            and pod["reason"] is None
        ),
        1.0,
        interval=0.25,
    )

    # the lead of an interactive cluster runs nothing of the user's: it restarts and replays its journal
    submitted = mc("exec", "cw", "--", "flux", "submit", "--urgency=0", "true")
    assert submitted.returncode == 0, submitted.stderr
    lead = backend.store.load("cw").pods[0].pid
    assert lead is not None
    os.kill(broker_of(lead), signal.SIGKILL)
    back = waiter(
        lambda: (s := _status(mc, "cw"))["pods"][0]["restarts"] == 1 and s["ranks_up"] is not None and s, timeout=30
    )
    assert back and back["pods"][0]["phase"] == "Running" and back["ranks_up"] == [0], back
    jobs = mc("exec", "cw", "--", "flux", "jobs", "-a", "--no-header", "-o", "{id.f58}")
    assert submitted.stdout.strip() in jobs.stdout.split(), jobs.stdout + jobs.stderr


def test_the_lead_of_a_command_is_not_restarted(mc: Any, machine: Any, backend: LocalBackend, waiter: Any) -> None:
    spec = _spec(machine.state_dir, "cmd", interactive=False, containers=[{"image": "local", "command": "sleep 60"}])
    assert mc("up", str(spec), "--detach", env=FAST).returncode == 0
    lead = backend.store.load("cmd").pods[0].pid
    assert lead is not None
    os.kill(broker_of(lead), signal.SIGKILL)
    gone = waiter(lambda: (s := _status(mc, "cmd"))["pods"][0]["phase"] == "Failed" and s, timeout=20)
    assert gone, _status(mc, "cmd")
    holds_for(  # well past the back-off
        "the lead of a command stays Failed, not restarted",
        lambda: (lead := _status(mc, "cmd")["pods"][0])["phase"] == "Failed" and lead["restarts"] == 0,
        1.0,
        interval=0.25,
    )
