"""How `flux start --test-size` forks its brokers (broker/testsize_fork.py): libc's fork when this process runs one
thread, os.fork otherwise or when libc's cannot be called, each with what a broker needs of the child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker import testsize
from broker.testsize_fork import choose_fork, running_threads

_CHILD_SAYS = """
import os, random, sys
from broker.testsize_fork import choose_fork, running_threads

assert running_threads() == 1, running_threads()
fork, why = choose_fork()
assert why == "" and fork is not os.fork, why
random.seed(45)
state = random.getstate()
read_end, write_end = os.pipe()
pid = fork()
if pid == 0:
    try:
        os.write(write_end, f"{os.getpid()} {random.random()}".encode())
    finally:
        os._exit(7)
os.close(write_end)
with os.fdopen(read_end) as reader:
    child_pid, child_draw = reader.read().split()
_pid, status = os.waitpid(pid, 0)
random.setstate(state)
print(pid, child_pid, os.getpid(), os.waitstatus_to_exitcode(status), child_draw, random.random())
"""


def _libc_forked_child() -> tuple[int, int, int, int, str, str]:
    """Fork with libc's fork from a process of one thread (its precondition: pytest's worker runs other tests'
    threads, and a libc fork there may leave the child waiting on a lock another thread held): what the child said
    (pid, draw), the parent's pid and the child's exit code."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_SAYS],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pid, child_pid, parent, code, child_draw, parent_draw = done.stdout.split()
    return int(pid), int(child_pid), int(parent), int(code), child_draw, parent_draw


def test_one_thread_forks_with_libc_and_the_child_is_a_process_of_its_own() -> None:
    pid, child_pid, parent, code, _child_draw, _parent_draw = _libc_forked_child()
    assert code == 7 and child_pid == pid and pid != parent


def test_a_child_forked_with_libc_draws_its_own_random_numbers() -> None:
    *_ids, child_draw, parent_draw = _libc_forked_child()
    assert child_draw != parent_draw  # reseeded in the child, as os.fork's hooks would have


def test_other_threads_or_no_libc_fork_mean_os_fork_and_say_why() -> None:
    fork, why = choose_fork(threads=3)
    assert fork is os.fork and why == "3 threads are running in this process"
    fork, why = choose_fork(threads=1, libc_fork=lambda: None)
    assert fork is os.fork and why == "libc's fork cannot be called here"


def test_threads_are_counted_by_the_kernel_or_else_by_threading(tmp_path: Path) -> None:
    for tid in ("1", "2"):
        (tmp_path / tid).mkdir()
    assert running_threads(str(tmp_path)) == 2
    assert running_threads(str(tmp_path / "missing")) >= 1


def test_an_instance_started_with_os_fork_says_so_once_and_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(testsize, "choose_fork", lambda: choose_fork(threads=1, libc_fork=lambda: None))
    code = testsize.run_test_instance(3, ["sh", "-c", "exit 5"])
    err = capsys.readouterr().err
    assert code == 5
    assert err.count("flux-start: forking brokers with os.fork: libc's fork cannot be called here") == 1


def test_one_broker_is_forked_by_os_fork_without_the_sharing_preparations(monkeypatch: pytest.MonkeyPatch) -> None:
    """libc's fork and the parent's heap taken buy sharing between brokers; one broker alone would only pay for them
    (ctypes loaded, ~1 MB more resident), so `--test-size=1` forks as CPython does."""

    def refuse() -> None:
        raise AssertionError("prepared sharing for a single broker")

    monkeypatch.setattr(testsize, "_prepare_sharing", refuse)
    assert testsize.run_test_instance(1, ["sh", "-c", "exit 4"]) == 4
