"""No process outlives its job: nested instances two levels deep, and tasks of a broker that was killed."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.jobs.api import JobClient
from broker.jobs.jobid import parse_jobid
from broker.modules.job_tree import rank_key, tree_value
from broker.testing import Instance, render_instance, run_flux, wait_for


def _running(marker: str) -> list[int]:
    """Pids whose command line mentions `marker` (found independently of the tags under test)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state != b"Z":
            pids.append(int(name))
    return pids


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[str]:
    """`sleep` under a name no other process on the machine has."""
    path = tmp_path / f"mc-tree-sleep-{os.getpid()}-{tmp_path.name}"
    path.symlink_to("/bin/sleep")
    yield str(path)
    for pid in _running(str(path)):  # never leave our own mess behind, whatever the outcome
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    inst = render_instance(tmp_path_factory.mktemp("tree"), 2)  # short: nested instances' sockets live below
    for rank in range(2):
        inst.start(rank, "-Sresource.cores=0-1", "-Sjob-exec.kill-timeout=0.3s")
    inst.wait_states({0: "up", 1: "up"})
    yield inst
    inst.cleanup()


@pytest.mark.serial  # three levels of brokers on 1 s heartbeats (broker.testing.FAST)
def test_cancelling_a_batch_two_levels_deep_leaves_nothing(pair: Instance, sleeper: str, tmp_path: Path) -> None:
    inner = tmp_path / "inner.sh"
    inner.write_text(
        "#!/bin/sh\n"
        f"flux submit -N2 -n2 {sleeper} 3000 >/dev/null\n"
        f"flux submit -N1 -n1 {sleeper} 3001 >/dev/null\n"
        f"exec {sleeper} 3002\n"
    )
    outer = tmp_path / "outer.sh"
    outer.write_text(
        f"#!/bin/sh\nflux batch -N2 --output={tmp_path}/inner.out {inner} >/dev/null\nexec {sleeper} 3003\n"
    )
    env = dict(os.environ, FLUX_URI=pair.uri(0))
    submitted = run_flux("batch", "-N2", f"--output={tmp_path}/outer.out", str(outer), env=env)
    assert submitted.returncode == 0, submitted.stderr
    jobid = parse_jobid(submitted.stdout.strip())
    # the outer script, the inner script and the inner instance's two-node job (its -N1 job may wait for a core)
    try:
        wait_for(lambda: len(_running(sleeper)) >= 4, 60, interval=0.2)
    except AssertionError:
        jobs = run_flux("jobs", "-a", env=env).stdout
        raise AssertionError(f"{_running(sleeper)}\n{jobs}\n{(tmp_path / 'outer.out').read_text()}") from None
    with JobClient(pair.uri(0)) as client:
        client.cancel(jobid)
        info = client.wait(jobid, timeout=60)
    assert info.result == "CANCELED"
    wait_for(lambda: not _running(sleeper), 10, interval=0.1)  # none re-parented to init and left running


def test_a_failed_job_leaves_no_background_process(pair: Instance, sleeper: str) -> None:
    with JobClient(pair.uri(0)) as client:
        jobid = client.submit(command=["sh", "-c", f"setsid {sleeper} 3004 & sleep 0.5; exit 3"], ntasks=1)
        info = client.wait(jobid, timeout=30)
    assert info.returncode == 3
    wait_for(lambda: not _running(sleeper), 10, interval=0.1)  # a new session did not let it escape


def test_tasks_of_a_killed_broker_die_when_it_comes_back(pair: Instance, sleeper: str) -> None:
    with JobClient(pair.uri(0)) as client:
        jobid = client.submit(command=[sleeper, "3005"], ntasks=2, nnodes=2)
        wait_for(lambda: len(_running(sleeper)) == 2, 30, interval=0.1)
        pair.kill(1)  # SIGKILL to the broker's own process group: its tasks live on in theirs
        pair.procs[1].wait(timeout=10)
        info = client.wait(jobid, timeout=60)  # the lead gives up on the lost rank's job
    assert not info.success
    assert len(_running(sleeper)) == 1  # rank 0's task was killed with the job; rank 1's is an orphan
    pair.start(1, "-Sresource.cores=0-1", "-Sjob-exec.kill-timeout=0.3s")
    wait_for(lambda: not _running(sleeper), 20, interval=0.1)


def test_tags_come_from_the_broker_not_the_submitter(tmp_path: Path) -> None:
    key = rank_key(str(tmp_path), 3)
    assert key == rank_key(str(tmp_path), 3) != rank_key(str(tmp_path), 2)
    assert tree_value({"MC_JOB_TREE": "outer.1"}, f"{key}.7") == f"outer.1 {key}.7"
    assert tree_value({}, f"{key}.7") == f"{key}.7"


def test_tasks_of_a_killed_lead_die_when_it_comes_back_and_fails_their_job(
    tmp_path_factory: pytest.TempPathFactory, sleeper: str
) -> None:
    inst = render_instance(tmp_path_factory.mktemp("lead"), 1)
    try:
        inst.start(0, "-Sresource.cores=0-1")
        inst.handle(0).close()  # up
        with JobClient(inst.uri(0)) as client:
            jobid = client.submit(command=[sleeper, "3006"], ntasks=1)
            wait_for(lambda: len(_running(sleeper)) == 1, 30, interval=0.1)
        inst.kill(0)
        inst.procs[0].wait(timeout=10)
        assert len(_running(sleeper)) == 1  # the task outlived its broker
        inst.start(0, "-Sresource.cores=0-1")  # same rundir and statedir: the journal is replayed
        try:
            wait_for(lambda: not _running(sleeper), 20, interval=0.1)
        except AssertionError:  # once under CI's load: say whether the lead came back, and what it said
            lead = inst.procs[0]
            state = "running" if lead.poll() is None else f"exited {lead.returncode}"
            inst.kill(0)
            out, err = lead.communicate(timeout=10)
            raise AssertionError(
                f"the task outlived the restarted lead ({state}):\n{out[-2000:]}\n{err[-4000:]}"
            ) from None
        inst.handle(0).close()
        with JobClient(inst.uri(0)) as client:
            info = client.wait(jobid, timeout=30)
        assert not info.success and info.exception_type, info  # failed with a reason, and nothing left running
    finally:
        inst.cleanup()
