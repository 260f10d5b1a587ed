"""`flux job wait` as flux-core's: waitable jobs keep their end until one waiter takes it (job-manager/wait.c)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.cli import submit_cmds
from broker.errors import FluxError
from broker.jobs.api import JobClient, JobInfo
from broker.jobs.jobid import encode_f58
from broker.jobs.submit_flags import JOBID_ANY
from broker.testing import FLUX, Instance, render_instance, run_flux, wait_for
from tests.waiting import wait_until


@pytest.fixture
def inst(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    instance = render_instance(tmp_path_factory.mktemp("wait"), 1)
    instance.start(0, "-Sresource.cores=0-1")
    instance.handle(0).close()
    yield instance
    instance.cleanup()


@pytest.fixture
def env(inst: Instance) -> dict[str, str]:
    return dict(os.environ, FLUX_URI=inst.uri(0))


@pytest.fixture
def client(inst: Instance) -> Iterator[JobClient]:
    with JobClient(inst.uri(0)) as c:
        yield c


def test_a_waitable_job_that_ended_before_the_wait_is_still_reported(env: dict[str, str], client: JobClient) -> None:
    """The race a wait over active jobs loses: both jobs are over before `wait --all` starts."""
    failing = run_flux("submit", "--flags=waitable", "sh", "-c", "exit 3", env=env).stdout.strip()
    passing = run_flux("submit", "--flags=waitable", "true", env=env).stdout.strip()
    wait_for(lambda: len(client.jobs("inactive")) == 2, timeout=20)  # a wait by id would take their ends
    waited = run_flux("job", "wait", "--all", "-v", env=env)
    assert waited.returncode == 1
    assert sorted(waited.stderr.splitlines()) == sorted(
        [f"{failing}: task(s) exited with exit code 3", f"{passing}: job completed successfully"]
    )
    again = run_flux("job", "wait", "--all", env=env)  # each end is taken once
    assert (again.returncode, again.stderr) == (0, "")


def test_wait_with_no_id_prints_the_next_waitable_job_and_exits_2_when_none_is_left(
    env: dict[str, str], client: JobClient
) -> None:
    client.submit(command=["true"])  # not waitable: never reported to a wait without an id
    jobid = run_flux("submit", "--flags=waitable", "sh", "-c", "sleep 0.3", env=env).stdout.strip()
    waited = run_flux("job", "wait", env=env)
    assert (waited.returncode, waited.stdout) == (0, f"{jobid}\n")
    none_left = run_flux("job", "wait", env=env)
    assert none_left.returncode == 2
    assert none_left.stderr == "flux-job: there are no more waitable jobs\n"
    with pytest.raises(FluxError) as refused:
        client.wait_any(timeout=5)
    assert refused.value.errno == errno.ECHILD


def test_more_waiters_than_waitable_jobs_are_refused_not_left_hanging(client: JobClient) -> None:
    jobid = client.submit(command=["sleep", "1"], waitable=True)
    tag = client.handle.send_request("job-manager.wait", {"id": JOBID_ANY})  # type: ignore[attr-defined]
    with pytest.raises(FluxError) as refused:
        client.wait_any(timeout=5)  # the one waitable job is spoken for
    assert refused.value.errno == errno.ECHILD
    assert client.handle.wait(tag, timeout=20)["id"] == jobid  # type: ignore[attr-defined]


def test_a_wait_by_id_takes_the_end_so_no_wait_for_any_gets_it(env: dict[str, str], client: JobClient) -> None:
    jobid = client.submit(command=["true"], waitable=True)
    assert run_flux("job", "wait", encode_f58(jobid), env=env).returncode == 0
    with pytest.raises(FluxError) as refused:
        client.wait_any(timeout=5)
    assert refused.value.errno == errno.ECHILD
    assert client.wait(jobid, timeout=5).id == jobid  # beyond flux-core: an ended job still answers by id


def test_tools_that_only_watch_a_job_leave_its_end_for_flux_job_wait(env: dict[str, str], client: JobClient) -> None:
    """`flux submit --wait`, `flux job status` and the job API's wait read the end; flux job wait still gets it,
    as with flux-core, whose submit --wait watches the eventlog."""
    jobid = run_flux("submit", "--flags=waitable", "--wait", "sh", "-c", "exit 4", env=env).stdout.strip()
    assert run_flux("job", "status", jobid, env=env).returncode == 4
    assert client.wait(jobid, timeout=5).returncode == 4
    waited = run_flux("job", "wait", env=env)
    assert (waited.returncode, waited.stdout.strip()) == (1, jobid)
    assert waited.stderr == "flux-job: task(s) exited with exit code 4\n"


def test_an_interrupted_waiter_takes_no_job_end_with_it(env: dict[str, str], client: JobClient) -> None:
    jobid = client.submit(command=["sleep", "2"], waitable=True)
    waiter = subprocess.Popen(
        [FLUX, "job", "wait"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(0.7)  # sleep: the wait reaches the job manager (which shows no queued wait to look at)
    waiter.send_signal(signal.SIGINT)
    waiter.communicate(timeout=10)
    assert waiter.returncode != 0
    info = client.wait_any(timeout=20)
    assert (info.id, info.success) == (jobid, True)


def test_waitable_jobs_of_a_cc_range_are_each_reported_once(env: dict[str, str]) -> None:
    ids = run_flux("submit", "--flags=waitable", "--cc=1-6", "sh", "-c", "exit $(({cc} % 2))", env=env).stdout.split()
    waited = run_flux("job", "wait", "--all", env=env)
    assert waited.returncode == 1
    failed = sorted(line.split(":")[0] for line in waited.stderr.splitlines())
    assert failed == sorted(ids[0::2])  # cc 1, 3, 5 exit 1


def test_submit_wait_exits_with_the_worst_code_and_leaves_waitable_ends_for_flux_job_wait(env: dict[str, str]) -> None:
    cc = run_flux("submit", "--quiet", "--cc=1-4", "--wait", "sh", "-c", "exit {cc}", env=env)
    assert cc.returncode == 4, cc.stderr
    waitable = run_flux("submit", "--flags=waitable", "--cc=1-2", "--wait", "sh", "-c", "exit 0", env=env)
    assert waitable.returncode == 0, waitable.stderr
    assert run_flux("job", "wait", "--all", env=env).returncode == 0  # both ends still there to take
    assert run_flux("job", "wait", env=env).returncode == 2  # and taken once


class OldBroker:
    """A broker without job-manager.wait-all: it answers per job (`flux submit --wait` then waits job by job)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def rpc(
        self, topic: str, payload: dict[str, Any] | None = None, nodeid: int = -1, timeout: float | None = 30.0
    ) -> dict[str, Any]:
        self.asked.append(topic)
        if topic == "job-manager.wait-all":
            raise FluxError(errno.ENOSYS, "job-manager.wait-all: no such service on rank 0")
        assert payload is not None
        return {
            "id": payload["id"],
            "state": "INACTIVE",
            "result": "FAILED",
            "returncode": payload["id"],
            "success": False,
        }

    def close(self) -> None:
        pass


def test_submit_wait_asks_job_by_job_a_broker_without_wait_all() -> None:
    broker = OldBroker()
    assert submit_cmds._wait_all(broker, [1, 3, 2]) == 3
    assert broker.asked == ["job-manager.wait-all", "job-manager.wait", "job-manager.wait", "job-manager.wait"]


def test_submit_flags_are_checked_by_the_broker(client: JobClient) -> None:
    spec = {"version": 1}
    for flags, said in ((1, "flags: unknown flag bits 0x1"), ("4", "'flags' must be int"), (-4, "flags: unknown")):
        with pytest.raises(FluxError) as refused:
            client.handle.rpc("job-manager.submit", {"jobspec": spec, "flags": flags}, 0, 5)
        assert refused.value.errno == errno.EINVAL and said in str(refused.value), refused.value
    assert client.jobs("all") == []  # nothing accepted


def test_a_waitable_job_keeps_its_wait_across_a_lead_restart(tmp_path: Path) -> None:
    inst = render_instance(tmp_path, 1)
    state = f"-Sstatedir={tmp_path / 'state'}"
    env = dict(os.environ, FLUX_URI=inst.uri(0))
    try:
        inst.start(0, "-Sresource.cores=0-1", state)
        inst.handle(0).close()
        with JobClient(inst.uri(0)) as client:
            client.queue("stop")
            jobid = client.submit(command=["true"], waitable=True)
        inst.kill(0, signal.SIGKILL)
        inst.procs[0].wait(timeout=10)
        inst.start(0, "-Sresource.cores=0-1", state)
        wait_for(lambda: run_flux("queue", "start", env=env).returncode == 0, timeout=20)
        waited = run_flux("job", "wait", env=env)
        assert (waited.returncode, waited.stdout.strip()) == (0, encode_f58(jobid))
    finally:
        inst.cleanup()


def _wait_any_once_the_lead_drops_the_waiter(client: JobClient) -> JobInfo:
    """The killed waiter's disconnect reaches the lead asynchronously (as in flux-core): until it does, the
    lead counts its wait and answers ECHILD; afterwards the job's end must be ours."""

    def ours() -> JobInfo | None:
        try:
            return client.wait_any(timeout=20)
        except FluxError as error:
            if error.errnum != errno.ECHILD:
                raise
            return None

    return wait_until("the lead drops the lost waiter's wait", ours, timeout=20)


def test_a_waiter_on_another_broker_that_is_interrupted_takes_no_job_end(tmp_path: Path) -> None:
    """Its disconnect goes up the tree to the lead, which holds the wait."""
    inst = render_instance(tmp_path, 2)
    try:
        inst.start(0, "-Sresource.cores=0-1")
        inst.start(1, "-Sresource.cores=0-1")
        inst.wait_states({1: "up"}, timeout=20)
        with JobClient(inst.uri(0)) as client:
            jobid = client.submit(command=["sleep", "2"], waitable=True)
            waiter = subprocess.Popen(
                [FLUX, "job", "wait"],
                env=dict(os.environ, FLUX_URI=inst.uri(1)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            time.sleep(0.7)  # sleep: the wait reaches the lead (which shows no queued wait to look at)
            waiter.send_signal(signal.SIGINT)
            waiter.communicate(timeout=10)
            assert waiter.returncode != 0
            info = _wait_any_once_the_lead_drops_the_waiter(client)
            assert (info.id, info.success) == (jobid, True)
    finally:
        inst.cleanup()


def test_a_wait_through_a_broker_that_is_lost_takes_no_job_end(tmp_path: Path) -> None:
    """The broker dies with its client's wait still at the lead: the lead drops it when the rank is lost."""
    inst = render_instance(tmp_path, 2)
    try:
        inst.start(0, "-Sresource.cores=0-1", heartbeat=("-Sheartbeat.interval=0.2", "-Sheartbeat.timeout=60"))
        inst.start(1, "-Sresource.cores=0-1", heartbeat=("-Sheartbeat.interval=0.2", "-Sheartbeat.timeout=60"))
        inst.wait_states({1: "up"}, timeout=20)
        with JobClient(inst.uri(0)) as client:
            jobid = client.submit(command=["sleep", "3"], waitable=True)
            with JobClient(inst.uri(1)) as remote:
                remote.handle.send_request("job-manager.wait", {"id": JOBID_ANY})  # type: ignore[attr-defined]
                time.sleep(0.5)  # sleep: the wait reaches the lead (which shows no queued wait to look at)
                inst.kill(1)
                inst.procs[1].wait(timeout=10)
                wait_for(lambda: inst.states()[1] != "up", timeout=10)
            info = _wait_any_once_the_lead_drops_the_waiter(client)  # the membership event reaches the job manager
            assert (info.id, info.success) == (jobid, True)
    finally:
        inst.cleanup()
