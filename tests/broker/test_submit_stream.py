"""`flux submit` streams its submissions, and the queue has a limit (issue 41: `--cc=1-100000000` built every
jobspec before sending the first, 4.1 GB after 48 s, nothing submitted)."""

from __future__ import annotations

import io
import os
import pty
import resource
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from broker.cli.submit_stream import Progress, render
from broker.client import Handle
from broker.jobs.api import JobClient
from broker.jobs.jobid import parse_jobid
from broker.rest.app import create_app
from broker.rest.jobs import BrokerJobService
from broker.rest.settings import RestSettings
from broker.rest.testing import serve_app
from broker.rest.users import UserStore
from broker.testing import FLUX, Instance, run_flux
from common import idset

LIMIT = 50
LIMIT_WORDS = "the queue is full: 50 active jobs is the limit (job-manager.active-num-limit)"


@pytest.fixture
def limited(make_instance: Callable[..., Instance]) -> Iterator[tuple[Instance, dict[str, str]]]:
    """One broker whose queue holds at most LIMIT active jobs, stopped (so that submitted jobs stay queued)."""
    inst = make_instance(1)
    inst.start(0, f"-Sjob-manager.active-num-limit={LIMIT}")
    inst.handle(0).close()
    env = dict(os.environ, FLUX_URI=inst.uri(0))
    assert run_flux("queue", "stop", env=env).returncode == 0
    yield inst, env


def _one_gib_of_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _active(inst: Instance) -> list[int]:
    with Handle(inst.uri(0)) as handle:
        return [job["id"] for job in handle.rpc("job-manager.list", {}, timeout=15)["jobs"]]


def test_a_huge_cc_streams_until_the_limit_then_stops_naming_it(limited: tuple[Instance, dict[str, str]]) -> None:
    """The first jobs are accepted long before 10**8 jobspecs could exist: in 1 GiB of address space the old
    client died listing the ids (MemoryError); now LIMIT are accepted, then the refusal ends the stream."""
    inst, env = limited
    proc = subprocess.run(
        [FLUX, "submit", "--cc=1-100000000", "true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_one_gib_of_address_space,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr == f"flux-submit: {LIMIT_WORDS}; submit more as jobs finish, or start the instance with a " \
        f"higher -Sjob-manager.active-num-limit ({LIMIT} of 100000000 jobs submitted)\n"  # fmt: skip
    printed = [parse_jobid(line) for line in proc.stdout.split()]
    assert len(printed) == LIMIT and sorted(printed) == sorted(_active(inst))  # every id printed was accepted

    one = run_flux("submit", "true", env=env)  # a single job: the limit's words, nothing about copies
    assert one.returncode == 1 and one.stderr == f"flux-submit: {LIMIT_WORDS}; submit more as jobs finish, or " \
        "start the instance with a higher -Sjob-manager.active-num-limit\n"  # fmt: skip
    assert len(_active(inst)) == LIMIT  # nothing half-accepted

    assert run_flux("cancel", proc.stdout.split()[0], env=env).returncode == 0  # a job ends: room for one
    for _ in range(100):
        again = run_flux("submit", "--cc=1-3", "true", env=env)
        if again.stdout:
            break
    assert again.returncode == 1 and len(again.stdout.split()) == 1 and "(1 of 3 jobs submitted)" in again.stderr


def test_the_limit_is_checked_at_start_and_applies_to_rest_submits(
    limited: tuple[Instance, dict[str, str]], make_instance: Callable[..., Instance], tmp_path: Path
) -> None:
    inst, env = limited
    assert run_flux("submit", f"--cc=1-{LIMIT}", "--quiet", "true", env=env).returncode == 0
    service = BrokerJobService(inst.uri(0))
    settings = RestSettings(state_dir=tmp_path, require_auth=False, token_signing_key="k" * 40)
    with serve_app(create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4))) as url:
        reply = httpx.post(f"{url}/v1/jobs/submit", json={"command": "true"}, timeout=30)
    assert reply.status_code == 400 and LIMIT_WORDS in reply.json()["Errors"][0], reply.text
    assert len(_active(inst)) == LIMIT

    bad = make_instance(1)
    started = bad.start(0, "-Sjob-manager.active-num-limit=many")
    _, err = started.communicate(timeout=30)
    assert started.returncode != 0 and "job-manager.active-num-limit: expected an integer, got 'many'" in err


def test_progress_is_drawn_on_a_terminal_only(limited: tuple[Instance, dict[str, str]]) -> None:
    _, env = limited
    primary, secondary = pty.openpty()
    with os.fdopen(primary, "rb", buffering=0) as terminal:
        proc = subprocess.run(
            [FLUX, "submit", "--progress", "--cc=1-40", "true"], env=env, stdout=subprocess.PIPE, stderr=secondary
        )
        os.close(secondary)
        drawn = b""
        while True:
            try:
                chunk = terminal.read(4096)
            except OSError:  # EIO: the writer is gone and everything was read
                break
            if not chunk:
                break
            drawn += chunk
    assert proc.returncode == 0 and len(proc.stdout.split()) == 40
    assert b"\x1b" not in proc.stdout  # the ids stay clean
    line = drawn.decode().split("\r\x1b[K")[-1]
    assert line.startswith("Submitting 40 jobs: 40 accepted 100.0%") and line.endswith("\n"), drawn
    piped = run_flux("submit", "--progress", "--cc=1-5", "true", env=env)  # not a terminal: no progress
    assert piped.returncode == 0 and piped.stderr == "" and len(piped.stdout.split()) == 5


def test_a_bad_cc_is_refused_naming_the_flag() -> None:
    for flag in ("--cc", "--bcc"):
        proc = run_flux("submit", "--dry-run", f"{flag}=5-1", "true", env=dict(os.environ, FLUX_URI="local:///x"))
        assert proc.returncode == 2 and proc.stderr.startswith(f"flux-submit: {flag}: invalid range '5-1'")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_waits_half_a_second_then_redraws_four_times_a_second() -> None:
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(1000, out, clock=clock)
    progress.update(10)
    assert out.getvalue() == ""  # a quick submission shows nothing
    clock.now += 0.5
    progress.update(300)
    assert out.getvalue() == "\r\x1b[K" + render(300, 1000, 0.5)
    clock.now += 0.1
    progress.update(400)  # too soon
    clock.now += 0.2
    progress.update(700, final=True)  # the end is always drawn, with a newline
    assert out.getvalue().endswith("\r\x1b[KSubmitting 1000 jobs:  700 accepted  70.0%    1s\n")
    quick = io.StringIO()
    Progress(5, quick, clock=clock).update(5, final=True)
    assert quick.getvalue() == ""


def test_ranges_are_merged_and_counted_without_listing_the_ids() -> None:
    spans = idset.ranges("[5,1-100000000,100000001-100000002,7]")
    assert spans == [(1, 100000002)] and idset.count(spans) == 100000002
    assert idset.ranges("9,1-2,4") == [(1, 2), (4, 4), (9, 9)] and idset.decode("9,1-2,4") == [1, 2, 4, 9]
    assert idset.ranges("") == [] and idset.count([]) == 0


def test_jobs_sharing_an_environment_each_run_with_their_own_across_a_restart(
    make_instance: Callable[..., Instance], tmp_path: Path
) -> None:
    """Equal environments are one dict in the lead (its memory per queued job, bench/bench_memory.py); jobs
    whose environments differ keep theirs, before a lead restart and after it."""
    inst = make_instance(1)
    statedir = f"-Sstatedir={tmp_path / 'state'}"
    inst.start(0, statedir)
    inst.handle(0).close()
    base = {"PATH": os.environ["PATH"]}
    order = ["a", "a", "b", "a", "a"]
    with JobClient(inst.uri(0)) as client:
        client.queue("stop")
        ids = [client.submit(command=["sh", "-c", "echo $X"], environment={**base, "X": x}) for x in order]
    inst.kill(0, signal.SIGKILL)
    inst.procs[0].wait(timeout=10)
    (inst.rundir(0) / "local").unlink(missing_ok=True)  # the killed broker's socket
    inst.start(0, statedir)
    inst.handle(0).close()
    with JobClient(inst.uri(0)) as client:
        client.queue("start")
        for jobid, x in zip(ids, order, strict=True):
            assert client.wait(jobid, timeout=30).success
            assert client.output_text(jobid) == f"{x}\n"
