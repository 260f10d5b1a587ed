"""The pod supervisor as a real process (no root needed): restart on failure with back-off, kill what the dead
container left in its session, share the Job's backoffLimit between pods, never restart after SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from broker.refused import EXIT_REFUSED
from miniclusters.backends.local import restart
from miniclusters.backends.local.process import SUPERVISOR
from miniclusters.backends.local.supervisor import RestartPolicy, backoff_delay, claim_failure
from tests.waiting import wait_until

# Fails (leaving a background sleep behind) until it has run `succeed_after` times, then exits 0.
FLAKY = """#!/bin/bash
n=$(( $(cat "{counter}" 2>/dev/null || echo 0) + 1 )); echo $n > "{counter}"
sleep 300 &
echo $! >> "{orphans}"
[ $n -gt {succeed_after} ] && exit 0
exit 3
"""


def _run(tmp_path: Path, policy: RestartPolicy, succeed_after: int) -> tuple[subprocess.Popen[bytes], Path]:
    entry = tmp_path / "entry.sh"
    entry.write_text(FLAKY.format(counter=tmp_path / "n", orphans=tmp_path / "orphans", succeed_after=succeed_after))
    env = {
        **os.environ,
        "MINICLUSTERS_LOCAL_ENTRYPOINT": str(entry),
        "MINICLUSTERS_LOCAL_EXIT": str(tmp_path / "exitcode"),
        "MINICLUSTERS_LOCAL_RESTART": policy.to_env(),
    }
    with open(tmp_path / "log", "wb") as log:
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", str(SUPERVISOR)], env=env, start_new_session=True, stderr=log
        )
    return child, tmp_path / "orphans"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _policy(tmp_path: Path, limit: int, index: int = 1, kind: str = "OnFailure") -> RestartPolicy:
    return restart.policy_for(index, kind, limit, 0.05, tmp_path, tmp_path, None)


def test_a_failing_container_restarts_and_its_leftovers_are_killed(tmp_path: Path) -> None:
    child, orphans = _run(tmp_path, _policy(tmp_path, limit=5), succeed_after=2)
    try:
        assert child.wait(timeout=30) == 0
        pids = [int(p) for p in orphans.read_text().split()]
        assert len(pids) == 3
        assert not any(_alive(p) for p in pids[:2]), "a failed container's process survived its restart"
        state = restart.restart_info(tmp_path)
        assert state.restarts == 2 and state.last_exit_code == 3 and state.waiting is None
        assert (tmp_path / "exitcode").read_text().strip() == "0"
        assert restart.job_failures(tmp_path) == 2
        assert "restart 1 in" in (tmp_path / "log").read_text()
    finally:
        for pid in [int(p) for p in orphans.read_text().split()] if orphans.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_backoff_limit_is_shared_and_then_the_pod_stays_failed(tmp_path: Path) -> None:
    (tmp_path / restart.FAILURES_FILE).write_text("1")  # another pod already failed once
    child, orphans = _run(tmp_path, _policy(tmp_path, limit=2), succeed_after=10)
    try:
        assert child.wait(timeout=30) == 3
        info = restart.restart_info(tmp_path)
        assert info.restarts == 1 and info.waiting == "BackoffLimitExceeded"
        assert restart.job_failures(tmp_path) == 2
        assert (tmp_path / "exitcode").read_text().strip() == "3"
    finally:
        for pid in [int(p) for p in orphans.read_text().split()] if orphans.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_lead_never_restarts_and_sigterm_stops_restarting(tmp_path: Path) -> None:
    child, orphans = _run(tmp_path, _policy(tmp_path, limit=5, index=0), succeed_after=10)
    assert child.wait(timeout=30) == 3
    assert restart.restart_info(tmp_path).restarts == 0 and restart.job_failures(tmp_path) == 0
    for pid in [int(p) for p in orphans.read_text().split()]:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)

    slow = RestartPolicy(**{**json.loads(_policy(tmp_path, limit=5).to_env()), "delay": 30.0})
    (tmp_path / "n").unlink()
    child, orphans = _run(tmp_path, slow, succeed_after=10)
    try:
        wait_until("CrashLoopBackOff", lambda: restart.restart_info(tmp_path).waiting == "CrashLoopBackOff", timeout=20)
        os.killpg(child.pid, signal.SIGTERM)  # what `down` does
        assert child.wait(timeout=5) == 3
        assert (tmp_path / "n").read_text().strip() == "1"
    finally:
        for pid in [int(p) for p in orphans.read_text().split()] if orphans.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("kind", "restarts"), [("OnFailure", True), ("Never", True), ("", False)])
def test_which_pods_restart(tmp_path: Path, kind: str, restarts: bool) -> None:
    assert restart.policy_for(2, kind, 4, 1.0, tmp_path, tmp_path, None).restart is restarts
    assert restart.policy_for(0, kind, 4, 1.0, tmp_path, tmp_path, None).restart is False  # the lead runs a command
    assert restart.policy_for(0, kind, 4, 1.0, tmp_path, tmp_path, None, interactive=True).restart is restarts


def test_back_off_doubles_up_to_its_cap_and_claims_are_counted(tmp_path: Path) -> None:
    assert [backoff_delay(n, 1.0, 5.0) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    path = tmp_path / "failures"
    assert [claim_failure(path, 2) for _ in range(3)] == [(True, 1), (True, 2), (False, 2)]
    assert claim_failure(tmp_path / "none", 0) == (False, 0)


def test_a_broker_that_refused_its_input_is_never_restarted(tmp_path: Path) -> None:
    """Exit EXIT_REFUSED (broker/refused.py): the same input fails the same way, so an interactive lead (which
    restarts on other failures) fails at once and `up` can say why."""
    entry = tmp_path / "entry.sh"
    entry.write_text(f'#!/bin/bash\necho run >> "{tmp_path / "runs"}"\nexit {EXIT_REFUSED}\n')
    policy = restart.policy_for(0, "OnFailure", 6, 0.05, tmp_path, tmp_path, None, interactive=True)
    assert policy.restart and RestartPolicy.from_env(policy.to_env()) == policy
    env = {
        **os.environ,
        "MINICLUSTERS_LOCAL_ENTRYPOINT": str(entry),
        "MINICLUSTERS_LOCAL_EXIT": str(tmp_path / "exitcode"),
        "MINICLUSTERS_LOCAL_RESTART": policy.to_env(),
    }
    child = subprocess.run([sys.executable, "-I", "-S", str(SUPERVISOR)], env=env, timeout=30, capture_output=True)
    assert child.returncode == EXIT_REFUSED
    assert (tmp_path / "runs").read_text() == "run\n"  # once
    assert restart.restart_info(tmp_path).restarts == 0
    assert b"refused its input for good; not restarting" in child.stderr
