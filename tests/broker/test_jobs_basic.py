"""Real jobs on a one-broker instance: output, exit codes, environment, cancel, timeout, rejection, the CLI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.errors import FluxError
from broker.jobs.api import JobClient
from broker.testing import Instance, render_instance, run_flux, wait_for
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def inst(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    root = tmp_path_factory.mktemp("jobs1")
    instance = render_instance(root, 1)
    instance.start(0, "-Sresource.cores=0-1", "-Sjob-exec.kill-timeout=1s")
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


def test_run_relays_output_and_exit_code(env: dict[str, str]) -> None:
    result = run_flux("run", "-n2", "--label-io", "sh", "-c", "echo out $FLUX_TASK_RANK; echo err >&2; exit 3", env=env)
    assert result.returncode == 3
    assert sorted(result.stdout.splitlines()) == ["0: out 0", "1: out 1"]
    assert result.stderr.count("err") == 2


def test_task_environment(env: dict[str, str], client: JobClient, tmp_path: Path) -> None:
    script = "echo $FLUX_JOB_ID $FLUX_TASK_RANK $FLUX_TASK_LOCAL_ID $FLUX_JOB_SIZE $FLUX_JOB_NNODES $FLUX_URI $MYVAR"
    env = dict(env, MYVAR="copied", DROPME="x")
    result = run_flux("submit", "-n2", "--env-remove=DROP*", f"--cwd={tmp_path}", "sh", "-c", script + "; pwd", env=env)
    assert result.returncode == 0, result.stderr
    jobid = result.stdout.strip()
    info = client.wait(jobid, timeout=20)
    assert info.success and info.returncode == 0 and info.ntasks == 2 and info.nnodes == 1
    out = sorted(client.output_text(jobid).splitlines())
    assert out.count(str(tmp_path)) == 2
    first = sorted(line for line in out if not line.startswith("/"))[0].split()
    assert first[0] == str(info.id) and first[1:5] == ["0", "0", "2", "1"]
    assert first[5] == env["FLUX_URI"] and first[6] == "copied"
    assert "DROPME" not in client.jobspec(jobid)["attributes"]["system"]["environment"]


def test_cancel_timeout_and_error_texts(env: dict[str, str], client: JobClient) -> None:
    jobid = client.submit(command=["sleep", "30"])
    client.wait_state(jobid, "RUN")
    cancel = run_flux("cancel", str(jobid), env=env)
    assert cancel.returncode == 0, cancel.stderr
    info = client.wait(jobid, timeout=20)
    assert info.result == "CANCELED" and info.exception_type == "cancel" and info.returncode == 143
    again = run_flux("cancel", info.f58, env=env)
    assert again.returncode == 1 and f"{info.f58}: job is inactive" in again.stderr
    unknown = run_flux("cancel", "ƒ2", env=env)
    assert unknown.returncode == 1 and "unknown job id" in unknown.stderr
    timed = run_flux("run", "-t", "0.5s", "sleep", "30", env=env)  # ended by its limit: 143, not sleep's 0
    assert timed.returncode == 143 and "type=timeout" in timed.stderr
    # a task that ignores SIGTERM is killed after the grace period
    jobid = client.submit(command=["sh", "-c", "trap '' TERM; sleep 30"], duration=0.3)
    info = client.wait(jobid, timeout=20)
    assert info.result == "TIMEOUT" and info.returncode == 137


def test_unsatisfiable_and_unsupported_are_rejected(env: dict[str, str], client: JobClient) -> None:
    nodes = run_flux("submit", "-N3", "true", env=env)
    assert nodes.returncode == 1 and "requested 3 nodes but the instance has at most 1" in nodes.stderr
    cores = run_flux("submit", "-c", "64", "true", env=env)
    assert cores.returncode == 1 and "cores per task" in cores.stderr
    unsupported = run_flux("submit", "--dependency=afterok:1", "true", env=env)
    assert unsupported.returncode == 2 and "not supported" in unsupported.stderr
    unknown = run_flux("submit", "--bogus", "true", env=env)
    assert unknown.returncode == 2 and "unrecognized option '--bogus'" in unknown.stderr
    with pytest.raises(FluxError, match="unsatisfiable"):
        client.submit(command=["true"], nnodes=2)
    missing = run_flux("run", "/no/such/program", env=env)
    assert missing.returncode == 127 and "start failed" in missing.stderr


def test_what_json_cannot_carry_is_refused_at_once_not_left_unanswered(env: dict[str, str]) -> None:
    """An infinite time limit is refused as flux-core refuses it; an Infinity or NaN anywhere else in a request
    is refused before it is sent (the broker could not read it, and the client waited out its 30 s timeout)."""
    before = run_flux("jobs", "-a", "-n", "-o", "{id}", env=env).stdout.split()
    unlimited = run_flux("submit", "-t", "inf", "true", env=env)
    assert unlimited.returncode == 2 and "--time-limit: 'inf': must be a normal, finite duration" in unlimited.stderr
    for command in ("submit", "run"):
        for extra in ([], ["--cc=1-2"]):
            infinite = run_flux(command, *extra, "--setattr=user.x=Infinity", "true", env=env)
            assert infinite.returncode == 1, infinite.stderr
            assert "job-manager.submit: Out of range float values are not JSON compliant" in infinite.stderr
    # answered, each of them, with the refusal (a request the broker cannot read was left to time out)
    assert run_flux("jobs", "-a", "-n", "-o", "{id}", env=env).stdout.split() == before  # and nothing half-made


def test_cc_bulksubmit_jobs_format_and_output_files(env: dict[str, str], client: JobClient, tmp_path: Path) -> None:
    out = tmp_path / "job-{{id}}.out"
    result = run_flux("submit", "--cc=1-3", f"--output={out}", "--job-name=cc{cc}", "echo", "copy{cc}", env=env)
    ids = result.stdout.split()
    assert result.returncode == 0 and len(ids) == 3
    infos = [client.wait(i, timeout=20) for i in ids]
    assert [client.output_text(i.id).strip() for i in infos] == ["copy1", "copy2", "copy3"]
    assert (tmp_path / f"job-{ids[1]}.out").read_text() == "copy2\n"
    bulk = run_flux("bulksubmit", "--wait", "sh", "-c", "echo {} {seq}", ":::", "a", "b", env=env)
    assert bulk.returncode == 0, bulk.stderr
    listing = run_flux("jobs", "-a", "-o", "{id.f58} {name} {status} {returncode}", env=env)
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "STATUS", "RC"]
    assert f"{ids[0]} cc1 COMPLETED 0" in lines
    default = run_flux("jobs", "-a", "-n", env=env)
    assert any(line.split()[0] == ids[0] and " CD " in line for line in default.stdout.splitlines())


def test_an_output_file_that_cannot_be_written_is_said_not_silently_skipped(
    env: dict[str, str], client: JobClient, tmp_path: Path
) -> None:
    """Cannot be opened: the job fails saying which file and why, as with Flux's shell. Cannot be written once
    open (a full disk; here /dev/full): a non-fatal exception says so, and the output stays for attach."""
    unopenable = run_flux("run", f"--output={tmp_path}/no/such/dir/out", "echo", "hi", env=env)
    assert unopenable.returncode != 0  # 1, or 143 when its task was still there to be stopped
    assert f"type=exec severity=0 cannot open output file {tmp_path}/no/such/dir/out: No such file" in unopenable.stderr
    jobid = run_flux("submit", "--output=/dev/full", "echo", "kept", env=env).stdout.strip()
    info = client.wait(jobid, timeout=20)
    assert info.success  # not fatal
    eventlog = run_flux("job", "eventlog", jobid, env=env).stdout
    assert 'type="output" severity=1 note="cannot write output file /dev/full: No space left on device' in eventlog
    assert run_flux("job", "attach", jobid, env=env).stdout == "kept\n"


def test_queue_control_urgency_and_wait_all(env: dict[str, str], client: JobClient) -> None:
    assert run_flux("queue", "stop", env=env).stdout.splitlines()[1] == "Scheduling is stopped"
    held = client.submit(command=["true"], urgency=0)
    first = client.submit(command=["echo", "first"])
    second = client.submit(command=["echo", "second"], urgency=20)
    wait_until("the pending jobs reach SCHED", lambda: {i.state for i in client.jobs("pending")} == {"SCHED"})
    status = run_flux("queue", "status", env=env)
    assert "Job submission is enabled" in status.stdout and "Scheduling is stopped" in status.stdout
    run_flux("queue", "start", env=env)
    assert client.wait(first, timeout=20).success and client.wait(second, timeout=20).success
    assert client.info(second).t_run <= client.info(first).t_run  # higher urgency first
    assert client.info(held).state == "SCHED"  # urgency 0 = held
    client.set_urgency(held, 16)
    assert client.wait(held, timeout=20).success
    failing = client.submit(command=["sh", "-c", "sleep 0.5; exit 1"], waitable=True)  # its end is kept
    waited = run_flux("job", "wait", "--all", env=env)
    assert waited.returncode == 1 and "exit code 1" in waited.stderr
    assert client.info(failing).result == "FAILED"
    idle = run_flux("queue", "idle", "-t", "10s", env=env)
    assert idle.returncode == 0
    events = [e["name"] for e in client.events(failing)]
    assert events == ["submit", "depend", "priority", "alloc", "start", "finish", "release", "clean"]


def test_attach_streams_output(env: dict[str, str], client: JobClient) -> None:
    jobid = client.submit(command=["sh", "-c", "echo one; sleep 0.3; echo two"])
    lines = [line.text for line in client.watch_output(jobid)]
    assert lines == ["one\n", "two\n"]
    attach = run_flux("job", "attach", str(jobid), env=env)
    assert attach.stdout == "one\ntwo\n" and attach.returncode == 0
    wait_for(lambda: client.info(jobid).state == "INACTIVE")
    restful = client.info(jobid).to_restful()
    assert {"id", "state", "result", "returncode", "nnodes", "nodelist", "runtime", "exception"} <= set(restful)


def test_a_client_that_reads_late_gets_every_answer(inst: Instance) -> None:
    """5,000 requests pipelined before reading any answer: every answer arrives. At zmq's default send limit (1,000
    queued per client) the broker's ROUTER refused the rest with EAGAIN and dropped them: `flux submit --cc=1-5000`
    timed out after 30 s with every job accepted."""
    from broker.cli.lean import LeanHandle

    with LeanHandle(inst.uri(0)) as handle:
        tags = [handle.send_request("broker.ping", {"pad": "x" * 200}) for _ in range(5000)]
        answers = [handle.wait(tag, timeout=60) for tag in tags]
    assert len(answers) == 5000 and all(a["pad"] == "x" * 200 for a in answers)


def test_submit_cc_while_jobs_run_returns_every_id(env: dict[str, str], client: JobClient) -> None:
    """The CLI case that found the dropped answers: a large --cc while the broker is busy running jobs."""
    busy = run_flux("submit", "--quiet", "--cc=1-300", "true", env=env)
    assert busy.returncode == 0, busy.stderr
    done = run_flux("submit", "--cc=1-3000", "--urgency=0", "true", env=env)  # held: they never run
    assert done.returncode == 0, done.stderr
    ids = done.stdout.split()
    assert len(ids) == len(set(ids)) == 3000
    assert run_flux("cancel", "--all", env=env).returncode == 0
    client.queue_idle("idle", timeout=120)


def test_the_job_tmpdir_exists_while_it_runs_and_is_removed_after(env: dict[str, str], client: JobClient) -> None:
    """Removed off the broker's loop (broker/modules/dir_remover.py), renamed first: gone soon after the job."""
    result = run_flux(
        "run", "sh", "-c", 'test -d "$FLUX_JOB_TMPDIR" && touch "$FLUX_JOB_TMPDIR/x" && echo $FLUX_JOB_TMPDIR', env=env
    )
    assert result.returncode == 0, result.stderr
    tmpdir = Path(result.stdout.strip())
    wait_for(lambda: not tmpdir.exists() and not list(tmpdir.parent.glob(tmpdir.name + ".gone-*")), 10)
