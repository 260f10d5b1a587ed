"""job-exec with the job manager on its own broker (broker/modules/job_exec.py): a start handed over typed
(exec_request.LocalExecStart) runs the task as the JSON form does, and the job's end is reported before its
directory is released, at the end of that turn of the loop or when the broker closes."""

from __future__ import annotations

import os
from pathlib import Path

from broker.modules.exec_request import ExecRequest, LocalExecStart
from broker.modules.job_exec import JobExec
from broker.modules.job_tree import JOB_TMP
from broker.testing_port import FakePort, fake_request


def started(tmp_path: Path, jobid: int, command: list[str]) -> tuple[JobExec, FakePort, str]:
    """job-exec on a fake broker, one job started on it through the typed hand-off; its FLUX_JOB_TMPDIR."""
    port = FakePort(hosts=["node0"], rundir=str(tmp_path))
    job_exec = JobExec(port)
    request = ExecRequest(
        jobid=jobid, gen=0, tasks=(0,), command=tuple(command), userid=os.getuid(), launch="tasks", size=1,
        ranks=(0,), hosts=(("node0", 1),), cores={0: (0,)}, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    req, replies = fake_request("job-exec.start", LocalExecStart(request))
    port.services["job-exec.start"](req)
    assert not replies.messages  # answered by the service's return value, not an error
    return job_exec, port, str(tmp_path / JOB_TMP / str(jobid))


def test_a_typed_start_runs_the_task_and_reports_its_status_and_output(tmp_path: Path) -> None:
    script = 'echo out; echo err >&2; test -d "$FLUX_JOB_TMPDIR" && echo "$FLUX_TASK_RANK $FLUX_JOB_ID"; exit 3'
    job_exec, port, tmpdir = started(tmp_path, 11, ["sh", "-c", script])
    port.loop.settle()
    done = port.sent_to("job-manager.exec-done")
    assert len(done) == 1 and done[0].payload["status"] == 3 << 8
    lines = [line for rpc in port.sent for line in rpc.payload.get("lines", [])]
    assert ["stdout", 0, "out\n"] in lines and ["stderr", 0, "err\n"] in lines and ["stdout", 0, "0 11\n"] in lines
    assert not os.path.exists(tmpdir) and len(job_exec.dirs.spares()) == 1  # released within the turn: a spare
    job_exec.close()


def test_a_job_s_directory_is_released_when_the_broker_closes_before_the_turn_ends(tmp_path: Path) -> None:
    job_exec, port, tmpdir = started(tmp_path, 12, ["true"])
    for _ in range(100):  # the task's exit and end of output, not the timer that releases the directory
        if port.sent_to("job-manager.exec-done"):
            break
        port.loop._run_readable(0.2)
    assert port.sent_to("job-manager.exec-done")[0].payload["status"] == 0
    assert os.path.isdir(tmpdir)  # reported first: the next job's start does not wait for the release
    job_exec.close()
    assert not os.path.exists(tmpdir) and os.listdir(tmp_path / JOB_TMP) == []


def test_a_later_execution_of_the_job_keeps_the_directory_the_ending_one_leaves(tmp_path: Path) -> None:
    """A requeued job started here again before the release of its first execution's directory (same path): the
    release leaves it to the running execution."""
    job_exec, port, tmpdir = started(tmp_path, 13, ["true"])
    for _ in range(100):
        if port.sent_to("job-manager.exec-done"):
            break
        port.loop._run_readable(0.2)
    request = ExecRequest(
        jobid=13, gen=1, tasks=(0,), command=("sleep", "30"), userid=os.getuid(), launch="tasks", size=1,
        ranks=(0,), hosts=(("node0", 1),), cores={0: (0,)}, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    req, _replies = fake_request("job-exec.start", LocalExecStart(request))
    port.services["job-exec.start"](req)
    port.loop.advance(0)  # the turn's timers: the first execution's release
    assert os.path.isdir(tmpdir) and job_exec.jobs[13].gen == 1
    job_exec.close()
    assert not os.path.exists(tmpdir)
