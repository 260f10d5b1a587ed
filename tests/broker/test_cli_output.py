"""What a user reads from `flux`: cut-off pipes, the command list, bad --cwd, pending NNODES, live --output files."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cli.commands import cli
from broker.cli.flux import JOB_COMMANDS
from broker.jobs.api import JobClient
from broker.jobs.jobid import parse_jobid
from broker.testing import FLUX, Instance, render_instance, run_flux, wait_for


@pytest.fixture(scope="module")
def inst(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    root = tmp_path_factory.mktemp("cliout")
    instance = render_instance(root, 1)
    instance.start(0, "-Sresource.cores=0-1", "-Sjob-exec.kill-timeout=1s")
    instance.handle(0).close()
    yield instance
    instance.cleanup()


@pytest.fixture
def env(inst: Instance) -> dict[str, str]:
    return dict(os.environ, FLUX_URI=inst.uri(0))


def _into_closed_pipe(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run flux with stdout a pipe whose reader is already gone: what `| head` does once it has its lines."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([FLUX, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    finally:
        os.close(write_end)
    return proc


@pytest.mark.parametrize(
    "args",
    [["--help"], ["batch", "--help"], ["submit", "--help"], ["jobs", "-a"], ["resource", "list"], ["lsattr"]],
)
def test_a_reader_that_goes_away_ends_every_command_quietly(args: list[str], env: dict[str, str]) -> None:
    if args == ["jobs", "-a"]:
        assert run_flux("run", "true", env=env).returncode == 0  # something to list
    proc = _into_closed_pipe(args, env)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr
    assert proc.returncode != 0  # cut off, as a C tool killed by SIGPIPE would be


def test_help_lists_every_command() -> None:
    text = run_flux("--help").stdout
    listed = {line.split()[0] for line in text.splitlines() if line.startswith("  ") and line.strip()}
    expected = {*JOB_COMMANDS, *cli.commands, "start", "broker", "restful"}
    assert expected <= listed, expected - listed


@pytest.mark.parametrize("command", ["jobs", "cancel", "queue", "job", "proxy"])
def test_each_command_helps_with_its_own_options(command: str) -> None:
    text = run_flux(command, "--help").stdout
    assert text.startswith(f"Usage: flux {command}")
    assert "--nodes" not in text  # before, every command showed submit's options


@pytest.mark.parametrize("spelling", ["version", "--version", "-V"])
def test_version_in_each_of_flux_cores_spellings(spelling: str) -> None:
    done = subprocess.run([FLUX, spelling], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("commands:") and "broker:" in done.stdout


def test_a_missing_working_directory_is_named_as_such(env: dict[str, str], tmp_path: Path) -> None:
    missing = run_flux("run", "--cwd=/nonexistent-dir", "true", env=env)
    assert missing.returncode != 0
    assert "working directory /nonexistent-dir: No such file or directory" in missing.stderr, missing.stderr
    assert "command not found" not in missing.stderr
    a_file = tmp_path / "plain-file"
    a_file.write_text("")
    not_dir = run_flux("run", f"--cwd={a_file}", "true", env=env)
    assert f"working directory {a_file}: Not a directory" in not_dir.stderr, not_dir.stderr
    command = run_flux("run", "no-such-command-xyz", env=env)
    assert command.returncode == 127 and "no-such-command-xyz: command not found" in command.stderr


def test_pending_jobs_show_the_nodes_they_asked_for(env: dict[str, str]) -> None:
    with JobClient(env["FLUX_URI"]) as client:
        blocker = client.submit(command=["sleep", "30"], ntasks=1, nnodes=1, exclusive=True)
        pending = client.submit(command=["true"], ntasks=1, nnodes=1)
        try:
            wait_for(lambda: client.info(blocker).state == "RUN", 20)
            assert client.info(pending).state in ("SCHED", "PRIORITY", "DEPEND")
            listing = run_flux("jobs", "-o", "{id.dec} {nnodes}", "-n", env=env).stdout
            assert f"{pending} 1" in listing.splitlines(), listing
        finally:
            client.cancel(blocker)
            client.wait(pending, timeout=20)


def test_batch_output_file_grows_while_the_job_runs(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "batch.out"
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho first\nsleep 3\necho second\n")
    jobid = run_flux("batch", "-N1", f"--output={out}", str(script), env=env).stdout.strip()
    assert jobid
    wait_for(lambda: out.exists() and "first" in out.read_text(), 10)
    assert "second" not in out.read_text()  # the job is still running, and its first line is already there
    with JobClient(env["FLUX_URI"]) as client:
        client.wait(parse_jobid(jobid), timeout=30)
    assert out.read_text().splitlines() == ["first", "second"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["job", "urgency", "1", "1e309"], "URGENCY: expected 0-31"),
        (["job", "urgency", "1", "99"], "URGENCY: expected 0-31"),
        (["job", "kill", "-s", "NOSUCH", "1"], "--signal: 'NOSUCH' is not a signal"),
        # refused whole before any row, even when there is no row to print the field in
        (["jobs", "-a", "-o", "{id} {nosuchfield}"], "--format: unknown field 'nosuchfield'"),
        (["jobs", "-a", "-o", "{id:>>>>}"], "--format: field 'id': Invalid format specifier"),
        (["jobs", "-a", "-u", "nosuchuser"], "--user: no such user 'nosuchuser'"),
        (["submit", "--flags=waitable,bogus", "true"], "--flags: unknown flag 'bogus'"),
        (["queue", "drain", "--timeout=abc"], "--timeout: 'abc' is not a duration"),
        (["queue", "save", "--timeout=-1", "x.tar"], "--timeout: '-1' is not a duration"),
        (["job", "kill"], "usage: flux job kill"),  # it did nothing and exited 0
        (["cancel", "--all", "ƒ1"], "Do not specify a list of jobids with --all"),  # the ids were ignored
        (["queue", "status", "extra"], "no queue named 'extra'"),  # the words were ignored
        (["queue", "stop", "a", "reason"], "a reason goes in -m MESSAGE"),
        (["job", "last", "abc"], "N: expected a number of jobs or a [start:stop:step] slice"),
        (["ping", "-c", "-1", "0"], "Invalid value for '-c'"),  # one ping, exit 0
        (["restful", "serve", "--port=99999"], "expected a port number 1-65535"),  # a traceback at bind
    ],
)
def test_odd_numbers_and_names_are_usage_errors_not_tracebacks(
    args: list[str], fragment: str, env: dict[str, str]
) -> None:
    proc = run_flux(*args, env=env)
    assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_job_last_prints_your_newest_jobs_as_flux_core_does(env: dict[str, str]) -> None:
    ids = run_flux("submit", "--cc=1-3", "true", env=env).stdout.split()
    newest = ids[::-1]
    assert run_flux("job", "last", env=env).stdout.split() == newest[:1]
    assert run_flux("job", "last", "2", env=env).stdout.split() == newest[:2]
    assert run_flux("job", "last", "[1:3]", env=env).stdout.split() == newest[1:3]
    every = run_flux("job", "last", "[:]", env=env).stdout.split()
    assert every[:3] == newest and run_flux("job", "last", "[-1]", env=env).stdout.split() == every[-1:]
    zero = run_flux("job", "last", "[::0]", env=env)
    assert zero.returncode == 1 and "step cannot be zero" in zero.stderr
    with JobClient(env["FLUX_URI"]) as client:
        assert client.last("[:5]", userid=os.getuid() + 4242) == []


def test_proxy_refuses_a_uri_that_names_no_instance(env: dict[str, str], tmp_path: Path) -> None:
    """As flux-core's proxy, which connects first: the command is not run against nothing."""
    marker = tmp_path / "ran"
    for uri, why in [
        ("nosuch://x", "unsupported URI scheme"),
        (f"local://{tmp_path}/no/sock", "cannot reach an instance at"),
    ]:
        proc = run_flux("proxy", uri, "touch", str(marker), env=env)
        assert proc.returncode == 1 and why in proc.stderr, proc.stderr
    assert not marker.exists()
    reached = run_flux("proxy", env["FLUX_URI"], "flux", "getattr", "size", env=env)
    assert reached.returncode == 0 and reached.stdout.strip() == "1", reached.stderr


def test_jobs_of_one_user_by_name_or_uid(env: dict[str, str]) -> None:
    import pwd

    jobid = run_flux("submit", "--flags=waitable", "true", env=env).stdout.strip()
    me = pwd.getpwuid(os.getuid()).pw_name
    for user in (me, str(os.getuid()), "all"):
        assert jobid in run_flux("jobs", "-a", "-n", "-o", "{id}", "-u", user, env=env).stdout.split()
    assert run_flux("jobs", "-a", "-n", "-o", "{id}", "-u", str(os.getuid() + 4242), env=env).stdout == ""


def test_every_known_jobs_field_renders_for_a_real_job(env: dict[str, str]) -> None:
    from broker.cli.jobs_format import FIELDS, field_values

    jobid = run_flux("submit", "true", env=env).stdout.strip()
    run_flux("job", "wait", jobid, env=env)
    fmt = " ".join("{" + name + "}" for name in sorted(FIELDS))
    proc = run_flux("jobs", "-n", "-o", fmt, jobid, env=env)
    assert proc.returncode == 0 and jobid in proc.stdout, proc.stderr
    with JobClient(env["FLUX_URI"]) as client:  # the names a format may use are exactly the fields there are
        assert set(field_values(client.info(jobid))) == FIELDS


def test_resource_list_counts_what_running_jobs_hold(env: dict[str, str]) -> None:
    with JobClient(env["FLUX_URI"]) as client:
        jobid = client.submit(command=["sleep", "30"], ntasks=1)
        try:
            wait_for(lambda: client.info(jobid).state == "RUN", 20)
            rows = {
                line.split()[0]: line.split()[1:3]
                for line in run_flux("resource", "list", env=env).stdout.splitlines()[1:]
            }
            assert rows["free"] == ["1", "1"] and rows["allocated"] == ["1", "1"], rows  # 1 of the node's 2 cores
        finally:
            client.cancel(jobid)
            client.wait(jobid, timeout=20)
    rows = {
        line.split()[0]: line.split()[1:3] for line in run_flux("resource", "list", env=env).stdout.splitlines()[1:]
    }
    assert rows["free"] == ["1", "2"] and rows["allocated"] == ["0", "0"], rows


def test_relative_output_files_land_in_the_jobs_working_directory(env: dict[str, str], tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    done = run_flux("run", f"--cwd={workdir}", "--output=out-{{id}}.txt", "echo", "here", env=env)
    assert done.returncode == 0, done.stderr
    (written,) = workdir.glob("out-*.txt")  # not in the broker's (or the test's) current directory
    assert written.read_text() == "here\n"
