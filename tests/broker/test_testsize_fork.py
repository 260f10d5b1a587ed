"""How `flux start --test-size` forks its brokers (broker/testsize_fork.py): libc's fork when this process runs one
thread, os.fork otherwise or when libc's cannot be called, each with what a broker needs of the child."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from broker import testsize, testsize_fork
from broker.testsize_fork import choose_fork, running_threads


def _child_says(fork: testsize_fork.Fork, what: Callable[[], object]) -> tuple[int, str, int]:
    """Fork with `fork`; the child writes what `what()` returns there to a pipe and exits 7: (pid, said, code)."""
    read_end, write_end = os.pipe()
    pid = fork()
    if pid == 0:
        try:
            os.write(write_end, str(what()).encode())
        finally:
            os._exit(7)
    os.close(write_end)
    with os.fdopen(read_end) as reader:
        said = reader.read()
    _pid, status = os.waitpid(pid, 0)
    return pid, said, os.waitstatus_to_exitcode(status)


def test_one_thread_forks_with_libc_and_the_child_is_a_process_of_its_own() -> None:
    fork, why = choose_fork(threads=1)
    assert why == "" and fork is not os.fork
    pid, said, code = _child_says(fork, os.getpid)
    assert code == 7 and said == str(pid) and pid != os.getpid()


def test_a_child_forked_with_libc_draws_its_own_random_numbers() -> None:
    fork, _why = choose_fork(threads=1)
    random.seed(45)
    state = random.getstate()
    _pid, said, _code = _child_says(fork, random.random)
    random.setstate(state)
    assert said != str(random.random())  # reseeded in the child, as os.fork's hooks would have


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
