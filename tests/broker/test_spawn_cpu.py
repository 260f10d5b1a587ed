"""A task's exec on the broker's own CPU (broker/modules/spawn_cpu.py): the task and the broker end with the masks
they would have had, a job bound to its cores keeps its own, and a broken mask call costs no task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.modules import cpu_affinity
from broker.modules.spawn_cpu import LONG_WAIT, PROBE, SpawnHere
from broker.modules.task_spawn import TaskProcess, TaskSpawner

CPUS = os.sched_getaffinity(0)
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="the broker's CPU is one of several only with two or more")
Calls = list[tuple[int, frozenset[int]]]


def recording(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Every sched_setaffinity made, as (pid, mask), passed on to the real one."""
    calls: Calls = []
    real = os.sched_setaffinity

    def setaffinity(pid: int, mask: object) -> None:
        calls.append((pid, frozenset(mask)))  # type: ignore[call-overload]
        real(pid, mask)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "sched_setaffinity", setaffinity)
    return calls


def loaded(log: Callable[[str], None] = pytest.fail) -> TaskSpawner:
    """A spawner whose plain spawns have waited long (as at load 3 here): it spawns here."""
    spawner = TaskSpawner(True, log, here=True)
    assert spawner.here is not None
    spawner.here.wait = 10 * LONG_WAIT
    return spawner


def started(spawner: TaskSpawner, command: list[str]) -> tuple[TaskProcess, set[int], str, int]:
    """Start `command` (SLOW); its process, its mask as the broker left it, its stdout and wait status."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = spawner.spawn(command, dict(os.environ), None, out_w, err_w)
    finally:
        os.close(out_w)
        os.close(err_w)
    with os.fdopen(out_r) as out, os.fdopen(err_r):
        text = out.read()  # it closes its stdout, then waits for SIGTERM: still there to be asked
        mask = os.sched_getaffinity(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
    return proc, mask, text, proc.reap()


SLOW = [
    sys.executable,
    "-I",
    "-S",
    "-c",
    "import os, signal; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM]); "
    "print(len(os.sched_getaffinity(0)), flush=True); os.close(1); signal.sigwait([signal.SIGTERM])",
]


@needs_two
def test_the_exec_runs_here_and_the_task_ends_with_the_brokers_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = recording(monkeypatch)
    proc, mask, text, status = started(loaded(), SLOW)
    assert proc.popen is None and status == 0
    assert mask == CPUS and text.strip() == str(len(CPUS))  # the task's own mask: the broker's
    assert os.sched_getaffinity(0) == CPUS  # and the broker's thread back to its own
    (me, here), (me_again, back), (child, away), (child_again, final) = calls
    assert (me, me_again, child, child_again) == (0, 0, proc.pid, proc.pid)
    assert len(here) == 1 and back == final == CPUS and away == CPUS - here  # on this CPU, then moved off it


@needs_two
def test_a_job_bound_to_its_cores_keeps_its_own_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = tuple(sorted(CPUS))[:2]
    with cpu_affinity.forked_on(cores):
        calls = recording(monkeypatch)
        _proc, mask, _text, status = started(loaded(), SLOW)
        monkeypatch.undo()
    assert status == 0 and mask == set(cores)
    assert calls[-1][1] == frozenset(cores) and os.sched_getaffinity(0) == CPUS
    with cpu_affinity.forked_on(cores[:1]):  # one core: nothing to choose, nothing changed
        calls = recording(monkeypatch)
        _proc, mask, _text, status = started(loaded(), SLOW)
        assert status == 0 and mask == set(cores[:1]) and calls == []


@needs_two
def test_a_broken_mask_call_starts_the_task_as_before_and_says_so_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_pid: int, _mask: object) -> None:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(os, "sched_setaffinity", broken)
    said: list[str] = []
    spawner = loaded(said.append)
    first = started(spawner, SLOW)
    second = started(spawner, SLOW)
    assert [(p.popen is None, mask, status) for p, mask, _text, status in (first, second)] == [
        (True, CPUS, 0),
        (True, CPUS, 0),
    ]
    assert len(said) == 1 and "job-exec.spawn-here" in said[0] and "Invalid argument" in said[0]


def test_off_unless_asked_for_and_off_changes_no_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = recording(monkeypatch)
    assert TaskSpawner(True, pytest.fail).here is None  # the child's narrowed mask is visible for a moment
    _proc, mask, _text, status = started(TaskSpawner(True, pytest.fail, here=False), SLOW)
    assert status == 0 and mask == CPUS and calls == []


def test_the_attribute_is_refused_by_name_and_on_runs_jobs(tmp_path: Path) -> None:
    flux = str(Path(sys.executable).with_name("flux"))
    bad = subprocess.run(
        [flux, "start", "-Sjob-exec.spawn-here=maybe", "true"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert bad.returncode != 0
    assert "job-exec.spawn-here" in bad.stderr and "maybe" in bad.stderr
    on = subprocess.run(
        [flux, "start", "-Sjob-exec.spawn-here=on", flux, "run", "sh", "-c", "echo ran; exit 3"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert on.returncode == 3 and on.stdout == "ran\n", on.stderr


def test_it_spawns_here_only_while_plain_spawns_wait_long_and_keeps_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = recording(monkeypatch)
    here = SpawnHere(pytest.fail)
    for _ in range(40):  # a quiet machine: plain spawns wait a quarter of the threshold
        assert here.narrow() is None
        here.waited(LONG_WAIT / 4)
    assert calls == []
    for _ in range(40):  # a loaded one: they wait four times it
        here.waited(4 * LONG_WAIT)
    plain = []
    for count in range(1, 2 * PROBE + 1):
        narrowed = here.narrow()
        if narrowed is None:
            plain.append(count)
        else:
            here.restore(narrowed, None)
    assert len(plain) == 2  # every PROBE-th spawn plain, measured: the rest here
    assert os.sched_getaffinity(0) == CPUS
    for _ in range(40):  # quiet again: the probes see it, and it stops
        here.waited(LONG_WAIT / 4)
    assert here.narrow() is None
