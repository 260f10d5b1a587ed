"""Starting a task (broker/modules/task_spawn.py): posix_spawn where it fits, Popen otherwise, the same process
either way (descriptors, process group, signals, exit status), and a broken posix_spawn costs no task."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.modules.task_spawn import ProgramFinder, TaskProcess, TaskSpawner
from broker.testing import Instance, render_instance, run_flux

SIGPIPE_BIT = 1 << (signal.SIGPIPE - 1)


def spawned(
    spawner: TaskSpawner, command: list[str], cwd: str | None = None, env: dict[str, str] | None = None
) -> tuple[TaskProcess, str, int]:
    """Start `command`, wait for it; its process, what it wrote on stdout, and its wait status."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = spawner.spawn(command, env or dict(os.environ), cwd, out_w, err_w)
    finally:
        os.close(out_w)
        os.close(err_w)
    with os.fdopen(out_r) as out, os.fdopen(err_r):
        text = out.read()
    return proc, text, proc.reap()


def test_posix_spawn_starts_the_task_as_popen_would() -> None:
    spawner = TaskSpawner(True, pytest.fail)
    probe = "import os; print(os.getpgid(0) == os.getpid(), os.read(0, 10) == b'')"
    proc, text, status = spawned(spawner, [sys.executable, "-I", "-S", "-c", probe])
    assert proc.popen is None  # the fast path
    assert status == 0
    assert text.split() == ["True", "True"]  # its own process group, stdin at end of file
    _proc, text, _status = spawned(spawner, ["grep", "SigIgn", "/proc/self/status"])
    assert int(text.split()[1], 16) & SIGPIPE_BIT == 0  # Python's SIG_IGN for SIGPIPE is not inherited


def test_exit_codes_and_signals_are_wait_statuses() -> None:
    spawner = TaskSpawner(True, pytest.fail)
    assert spawned(spawner, ["sh", "-c", "exit 3"])[2] == 3 << 8
    assert spawned(spawner, ["sh", "-c", "kill -9 $$"])[2] == signal.SIGKILL


def test_what_posix_spawn_cannot_do_goes_to_popen(tmp_path: Path) -> None:
    spawner = TaskSpawner(True, pytest.fail)
    proc, text, status = spawned(spawner, ["pwd"], cwd=str(tmp_path))  # another directory
    assert proc.popen is not None and text.strip() == str(tmp_path) and status == 0
    with pytest.raises(FileNotFoundError) as missing:
        spawned(spawner, ["no-such-command-here"])
    assert missing.value.filename == "no-such-command-here"  # as start_failure reads it: exit 127
    script = tmp_path / "not-executable"
    script.write_text("true\n")
    with pytest.raises(PermissionError):
        spawned(spawner, [str(script)])


def test_a_broken_posix_spawn_starts_the_task_with_popen_and_says_so_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> int:
        raise RuntimeError("posix_spawn is broken")

    monkeypatch.setattr(os, "posix_spawn", broken)
    said: list[str] = []
    spawner = TaskSpawner(True, said.append)
    first = spawned(spawner, ["sh", "-c", "echo first"])
    second = spawned(spawner, ["sh", "-c", "echo second"])
    assert [(p.popen is not None, text, status) for p, text, status in (first, second)] == [
        (True, "first\n", 0),
        (True, "second\n", 0),
    ]
    assert len(said) == 1 and "posix_spawn is broken" in said[0] and "Popen" in said[0]


def test_turned_off_every_task_starts_with_popen() -> None:
    proc, text, status = spawned(TaskSpawner(False, pytest.fail), ["echo", "plain"])
    assert proc.popen is not None and text == "plain\n" and status == 0


def test_a_found_program_is_remembered_for_a_while_and_forgotten_when_its_exec_fails(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    program = second / "prog"
    program.write_text("#!/bin/sh\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    now = [0.0]
    finder = ProgramFinder(clock=lambda: now[0], keep=1.0)
    env = {"PATH": f"{first}:{second}"}
    assert finder.find("prog", env) == str(program)
    earlier = first / "prog"
    earlier.write_text("#!/bin/sh\n")
    earlier.chmod(program.stat().st_mode)
    assert finder.find("prog", env) == str(program)  # remembered
    now[0] = 1.5
    assert finder.find("prog", env) == str(earlier)  # looked up again
    earlier.unlink()
    assert finder.find("prog", env) == str(earlier)  # remembered, unchecked: an exec there fails and says so
    finder.forget("prog", env)
    assert finder.find("prog", env) == str(program)  # forgotten: looked up at once
    assert finder.find("prog", {"PATH": str(first)}) is None
    assert finder.find("./prog", env) == "./prog"


def test_a_program_gone_from_where_it_was_found_runs_from_where_it_is_now(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for directory in (first, second):
        directory.mkdir()
        program = directory / "prog"
        program.write_text(f"#!/bin/sh\necho {directory.name}\n")
        program.chmod(0o755)
    env = dict(os.environ, PATH=f"{first}:{second}:{os.environ['PATH']}")
    spawner = TaskSpawner(True, pytest.fail)
    assert spawned(spawner, ["prog"], env=env)[1:] == ("a\n", 0)
    (first / "prog").unlink()  # remembered there, gone now: Popen finds and runs the other
    proc, text, status = spawned(spawner, ["prog"], env=env)
    assert (proc.popen is not None, text, status) == (True, "b\n", 0)
    proc, text, status = spawned(spawner, ["prog"], env=env)  # found again: the fast path
    assert (proc.popen is None, text, status) == (True, "b\n", 0)


@pytest.fixture(scope="module")
def inst(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    instance = render_instance(tmp_path_factory.mktemp("spawn"), 1)
    instance.start(0, "-Sresource.cores=0-1")
    instance.handle(0).close()
    yield instance
    instance.cleanup()


def test_a_job_inherits_no_descriptor_of_the_broker(inst: Instance) -> None:
    env = dict(os.environ, FLUX_URI=inst.uri(0))
    probe = "import os; print(sorted(os.listdir('/proc/self/fd')))"
    result = run_flux("run", sys.executable, "-I", "-S", "-c", probe, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['0', '1', '2', '3']"  # 3: listdir's own


def test_a_descriptor_the_broker_inherited_is_not_passed_on_to_jobs(tmp_path: Path) -> None:
    leaked = os.open(os.devnull, os.O_RDONLY)
    probe = "import os; print(sorted(os.listdir('/proc/self/fd')))"
    flux = str(Path(sys.executable).with_name("flux"))
    try:
        done = subprocess.run(
            [flux, "start", flux, "run", sys.executable, "-I", "-S", "-c", probe],
            pass_fds=(leaked,),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
    finally:
        os.close(leaked)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['0', '1', '2', '3']"


def test_a_bad_posix_spawn_attribute_is_refused_by_name(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("flux")), "start", "-Sjob-exec.posix-spawn=maybe", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "job-exec.posix-spawn" in done.stderr and "maybe" in done.stderr
