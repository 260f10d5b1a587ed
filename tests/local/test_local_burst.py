"""Acceptance, on real local pods (netns, real brokers, real Open MPI): examples/burst.yaml, 2 pods with maxSize 2,
runs a burstable MPI job on 4 nodes (its own pods and 2 burst pods in their own network), and the burst goes away
afterwards; a job no plugin can take waits with the reason in `flux jobs` and `minicluster status`; `minicluster
burst` bursts by hand and `status` shows the burst ranks apart. A burst broker killed under a job fails the job
and the burst goes; a pod follower restarted while a burst is attached rejoins."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from broker.testing import require_tool
from miniclusters.backends.local import netns
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.testing.pod_processes import broker_of

pytestmark = [pytest.mark.needs_root, pytest.mark.timeout(900)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "burst.yaml"
MPI_HELLO = Path(__file__).resolve().parents[2] / "images" / "openmpi-openfoam" / "mpi-hello.c"


def _status(mc: Any) -> dict[str, Any]:
    result = mc("status", "burst", "-o", "json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_burstable_mpi_job_runs_across_the_pods_and_a_burst_which_then_goes_away(
    mc: Any, machine: Any, backend: LocalBackend, waiter: Any
) -> None:
    require_tool("mpicc", "libopenmpi-dev")
    work = Path(tempfile.mkdtemp(prefix="mcburst"))
    hello = work / "mpi-hello"
    subprocess.run(["mpicc", "-O2", "-o", str(hello), str(MPI_HELLO)], check=True, timeout=120)
    env = {"MINICLUSTERS_BURST_IDLE": "6", "OMPI_MCA_btl": "tcp,self"}
    up = mc("up", str(EXAMPLE), "--detach", "--timeout", "150", env=env, timeout=180)
    assert up.returncode == 0, up.stderr

    # a job no plugin can take (the spec lets `local` bring 2 nodes): pending, with the reason, never a crash
    big = mc("exec", "burst", "--", "flux", "submit", "--setattr=burstable", "-N9", "true")
    assert big.returncode == 0, big.stderr
    reason = "burst of 7 node(s) not possible: local: 7 node(s) asked, this machine takes at most 2 burst pods"
    assert waiter(lambda: reason in mc("exec", "burst", "--", "flux", "jobs").stdout, timeout=60)
    assert _status(mc)["bursts"]["pending"] == {big.stdout.strip(): reason}
    assert mc("exec", "burst", "--", "flux", "cancel", big.stdout.strip()).returncode == 0

    # the acceptance job: 4 nodes on a 2-pod cluster, an MPI program printing its 4 hosts
    run = mc(
        "exec", "burst", "--", "flux", "submit", "--setattr=burstable", "-N4", "-n4", "--watch", str(hello),
        timeout=240, env={"PATH": f"{work}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    hosts = sorted(line.rsplit(" on ", 1)[1] for line in run.stdout.splitlines() if " on " in line)
    assert hosts == ["burst-0", "burst-1", "burst-b1-0", "burst-b1-1"], run.stdout
    lead_slot = backend.store.load("burst").slot
    if backend.store.exists("burst-b1"):  # still up (idle period): its own network, the lead's address exposed
        record = backend.store.load("burst-b1")
        assert record.slot != lead_slot and record.pods[0].address.split(".")[2] == str(record.slot)

    # the burst goes away: its ranks leave the lead, its pods, namespaces and state are removed
    def gone() -> bool:
        status = _status(mc)
        return (
            status["bursts"] is not None and status["bursts"]["bursts"] == [] and not backend.store.exists("burst-b1")
        )

    assert waiter(gone, timeout=90)
    assert not [n for n in netns.list_namespaces() if n.startswith("mc-burst-b1-")]
    resources = mc("exec", "burst", "--", "flux", "resource", "list").stdout
    assert "burst-b1" not in resources and " 2 " in resources.splitlines()[1]
    assert mc("exec", "burst", "--", "flux", "getattr", "size").stdout.strip() == "2"

    # by hand: `minicluster burst`, and `status` shows the burst ranks apart (text and JSON)
    manual = mc("burst", "burst", "--plugin", "local", "--nodes", "1", timeout=180)
    assert manual.returncode == 0, manual.stderr
    assert "joined as ranks [2]" in manual.stdout
    status = _status(mc)
    assert status["bursts"]["bursts"] == [{"name": "burst-b1", "ranks": [2], "hosts": ["burst-b1-0"], "up": 1}]
    text = mc("status", "burst").stdout
    assert "Burst burst-b1: ranks 2 (1/1 up) burst-b1-0" in text
    bad = mc("burst", "burst", "--plugin", "nope", "--nodes", "1")
    assert bad.returncode == 2 and "--plugin" in bad.stderr
    # `down` of the lead takes its bursts with it (the fixture then checks nothing is left on the machine)
    assert mc("down", "burst").returncode == 0
    assert not backend.store.exists("burst-b1")


def _burst_by_one(mc: Any) -> None:
    """examples/burst.yaml (2 pods) and a burst of 1 node by hand: rank 2, burst-b1-0."""
    up = mc("up", str(EXAMPLE), "--detach", "--timeout", "150", env={"MINICLUSTERS_BURST_IDLE": "5"}, timeout=180)
    assert up.returncode == 0, up.stderr
    manual = mc("burst", "burst", "--plugin", "local", "--nodes", "1", timeout=180)
    assert manual.returncode == 0 and "joined as ranks [2]" in manual.stdout, manual.stdout + manual.stderr


def _job(mc: Any, jobid: str, fields: str) -> str:
    done = mc("exec", "burst", "--", "flux", "jobs", "-a", "--no-header", "-o", fields, jobid)
    return str(done.stdout.strip())


def test_a_job_across_a_burst_whose_broker_is_killed_fails_and_the_burst_goes(
    mc: Any, machine: Any, backend: LocalBackend, waiter: Any
) -> None:
    _burst_by_one(mc)
    submitted = mc("exec", "burst", "--", "flux", "submit", "--setattr=burstable", "-N3", "sleep", "300")
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    assert waiter(lambda: _job(mc, job, "{state}") == "RUN", timeout=60)
    supervisor = backend.store.load("burst-b1").pods[0].pid
    assert supervisor is not None
    os.kill(broker_of(supervisor), signal.SIGKILL)

    # as a pod follower's death does: the job fails, saying which rank was lost
    assert waiter(lambda: _job(mc, job, "{state}") == "INACTIVE", timeout=60), _job(mc, job, "{state} {result}")
    assert _job(mc, job, "{result}") == "FAILED"
    assert "lost contact with broker rank 2 (burst-b1-0)" in _job(mc, job, "{exception.note}")

    # and the burst goes (its idle period is 5 s): its ranks leave the lead, its pods are removed
    def gone() -> bool:
        status = _status(mc)
        return (
            status["bursts"] is not None and status["bursts"]["bursts"] == [] and not backend.store.exists("burst-b1")
        )

    assert waiter(gone, timeout=90), _status(mc)
    assert mc("exec", "burst", "--", "flux", "getattr", "size").stdout.strip() == "2"
    # the CLI's refusals while here: an unknown burst, and more nodes than the spec lets `local` bring (size 2)
    unknown = mc("burst", "burst", "--release", "burst-b9")
    assert unknown.returncode == 2 and "--release: no burst 'burst-b9'" in unknown.stderr
    over = mc("burst", "burst", "--plugin", "local", "--nodes", "3")
    assert over.returncode == 2 and "--nodes 3: local: 3 node(s) asked" in over.stderr
    assert mc("down", "burst").returncode == 0


def test_a_pod_follower_restarted_while_a_burst_is_attached_rejoins(
    mc: Any, machine: Any, backend: LocalBackend, waiter: Any
) -> None:
    _burst_by_one(mc)
    supervisor = backend.store.load("burst").pods[1].pid
    assert supervisor is not None
    os.kill(broker_of(supervisor), signal.SIGKILL)

    def rejoined() -> dict[str, Any] | None:
        status = _status(mc)
        pod = status["pods"][1]
        return status if pod["restarts"] >= 1 and pod["ready"] and status["ranks_up"] == [0, 1, 2] else None

    back = waiter(rejoined, timeout=60)
    assert back, _status(mc)
    assert back["pods"][1]["reason"] is None and back["state"] == "Running"  # no CrashLoopBackOff
    assert back["pods"][1]["restarts"] == 1  # it joined at its first restart: no back-off burned
    run = mc("exec", "burst", "--", "flux", "run", "--setattr=burstable", "-N3", "hostname", timeout=60)
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.split()) == ["burst-0", "burst-1", "burst-b1-0"]
    assert mc("down", "burst").returncode == 0
