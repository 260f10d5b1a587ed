"""When a peer is lost: at once when its connection closes (a broker that died), but only after heartbeat.timeout
of silence (30 s by default, flux-core's tbon.torpid_max) when it is alive and starved or stopped (tree_link.py)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from broker.jobs.api import JobClient
from broker.testing import Instance, kill_orphans

MakeInstance = Callable[..., Instance]

# Silence alone would take a minute to lose a peer here: what these tests see lost is lost by its connection.
SLOW_SILENCE = ("-Sheartbeat.interval=0.2", "-Sheartbeat.timeout=60")


def _stderr(inst: Instance, rank: int) -> str:
    proc = inst.procs[rank]
    inst.kill(rank, signal.SIGTERM)
    proc.wait(timeout=20)
    return proc.stderr.read() if proc.stderr else ""


def test_a_killed_follower_is_lost_by_its_closed_connection_and_fails_its_job(make_instance: MakeInstance) -> None:
    inst = make_instance(3)
    for rank in range(3):
        inst.start(rank, "-Sresource.cores=0", heartbeat=SLOW_SILENCE)
    inst.wait_states(dict.fromkeys(range(3), "up"))
    with JobClient(inst.uri(0)) as client:
        job = client.submit(command=["sleep", "60"], nnodes=3, ntasks=3)
        client.wait_state(job, "RUN")
        inst.kill(2)
        inst.wait_states({2: "lost", 1: "up"}, timeout=15)  # a quarter of the minute of silence: by the connection
        info = client.wait(job, timeout=20)
        assert info.exception_type == "node-failure", info
        assert "lost contact with broker rank 2 (node2)" in (info.exception_note or "")
    kill_orphans(inst.uri(2))
    assert "child rank 2 (node2) lost: its connection closed" in _stderr(inst, 0)


def test_followers_of_a_crashed_lead_exit_without_waiting_out_the_silence(make_instance: MakeInstance) -> None:
    inst = make_instance(3)
    for rank in range(3):
        inst.start(rank, heartbeat=SLOW_SILENCE)
    inst.wait_states(dict.fromkeys(range(3), "up"))
    inst.kill(0)
    for rank in (1, 2):  # within a third of the minute of silence: by the connection (said below)
        assert inst.procs[rank].wait(timeout=20) == 1
    stderr = inst.procs[1].stderr.read() if inst.procs[1].stderr else ""
    assert "lost connection to parent rank 0; exiting" in stderr


def test_a_follower_stopped_past_the_old_five_seconds_keeps_its_rank_and_its_job(make_instance: MakeInstance) -> None:
    """A broker in a multiplexed pod at 200m can go unheard for seconds while its connection stays open; with
    the broker's default heartbeats it is neither lost nor its simulation failed."""
    inst = make_instance(2)
    for rank in range(2):
        inst.start(rank, "-Sresource.cores=0", heartbeat=())
    inst.wait_states({0: "up", 1: "up"})
    with JobClient(inst.uri(0)) as client:
        job = client.submit(command=["sleep", "8"], nnodes=2, ntasks=2)
        client.wait_state(job, "RUN")
        os.kill(inst.procs[1].pid, signal.SIGSTOP)  # the broker only: its task sleeps on
        try:
            time.sleep(7)  # sleep: unheard past the old five seconds of silence
        finally:
            os.kill(inst.procs[1].pid, signal.SIGCONT)
        assert inst.states()[1] == "up"
        info = client.wait(job, timeout=30)
        assert info.success, info
    assert " lost" not in _stderr(inst, 0)
