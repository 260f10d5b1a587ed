"""Ctrl-C twice during `up`'s teardown (issue 24): the teardown completes; one cut short some other way (a kill) is
shown as Deleting by `list` and `status` alike and finished by the next `up` or `down`, never called "already up".

Every test makes the teardown take seconds: a process of pod 1 ignores SIGTERM, so the teardown waits out its grace
period before SIGKILL, and the signals below land while it runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from miniclusters.backends.local import process
from miniclusters.backends.local.backend import LocalBackend

NAME = "td"
STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


class Up:
    """A real foreground `minicluster up` whose output goes to files the test reads while it runs."""

    def __init__(self, minicluster: str, spec: Path, directory: Path) -> None:
        self.out = directory / "up.out"
        self.err = directory / "up.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen([minicluster, "up", str(spec), "--timeout", "90"], stdout=out, stderr=err)

    def stderr(self) -> str:
        return self.err.read_text()

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def running_up(
    machine: Any, spec_writer: Any, waiter: Any, minicluster_bin: str, backend: LocalBackend, tmp_path: Path
) -> Iterator[Up]:
    """`up` of a 2-pod cluster following its lead's output, with a pod-1 process that ignores SIGTERM."""
    spec = spec_writer(machine.state_dir, NAME, size=2, max_size=2, interactive=False, command="sleep 600")
    up = Up(minicluster_bin, spec, tmp_path)
    stubborn = None
    try:
        assert waiter(lambda: "Name:" in up.out.read_text() or up.proc.poll() is not None, timeout=90)
        assert up.proc.poll() is None, up.stderr()
        machine.remember()
        tag = process.tag_for(backend.store.cluster_dir(NAME), 1)
        stubborn = subprocess.Popen(
            [sys.executable, "-c", STUBBORN],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, process.TAG_VARIABLE: tag},
            start_new_session=True,
        )
        assert stubborn.stdout is not None and stubborn.stdout.readline().strip() == "ready"
        yield up
    finally:
        up.stop()
        if stubborn is not None and stubborn.poll() is None:
            stubborn.kill()
        if stubborn is not None:
            stubborn.wait()


def _interrupt_into_teardown(up: Up, waiter: Callable[..., Any], backend: LocalBackend) -> None:
    """The first Ctrl-C, returning once `up` says it is tearing down and its deleting mark is on disk."""
    up.proc.send_signal(signal.SIGINT)
    assert waiter(lambda: "tearing down" in up.stderr(), timeout=20, interval=0.05), up.stderr()
    # the teardown has begun once its mark is on disk (the message comes first, from the signal handler; a loaded
    # machine may take a moment to write the mark); it then waits for the stubborn process
    assert waiter(lambda: backend.store.load(NAME).deleting, timeout=20, interval=0.05)


def _state_everywhere(mc: Callable[..., Any], name: str) -> tuple[str | None, str]:
    """(the STATE `list` shows for `name`, or None when it lists no such cluster; the state `status` shows)."""
    listed = mc("list")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    in_list = next((row[-1] for row in rows if row and row[0] == name), None)
    shown = mc("status", name, "-o", "json")
    in_status = json.loads(shown.stdout)["state"] if shown.returncode == 0 else f"exit {shown.returncode}"
    return in_list, in_status


def test_ctrl_c_twice_during_the_teardown_still_removes_everything(
    mc: Any, machine: Any, running_up: Up, waiter: Any, backend: LocalBackend, spec_writer: Any
) -> None:
    up = running_up
    _interrupt_into_teardown(up, waiter, backend)
    assert up.proc.poll() is None, "the teardown should still be waiting for the stubborn process"
    up.proc.send_signal(signal.SIGINT)  # the second Ctrl-C, while pods are being stopped
    code = up.wait()
    stderr = up.stderr()
    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.count("interrupted: tearing down") == 1  # said once, and the second Ctrl-C said why it waits
    assert stderr.count("interrupted again") == 1
    assert not backend.store.cluster_dir(NAME).exists()
    assert _state_everywhere(mc, NAME) == (None, "exit 1")  # neither lists nor shows it
    assert machine.leftovers() == []
    again = mc("up", str(machine.state_dir / f"{NAME}.yaml"), "--detach")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already" not in again.stdout + again.stderr


def test_a_teardown_cut_short_is_deleting_everywhere_and_the_next_up_finishes_it(
    mc: Any, machine: Any, running_up: Up, waiter: Any, backend: LocalBackend
) -> None:
    up = running_up
    _interrupt_into_teardown(up, waiter, backend)
    assert up.proc.poll() is None, "the teardown should still be waiting for the stubborn process"
    up.proc.kill()  # cut short: what a second Ctrl-C did before, or a closed terminal
    up.wait()
    assert _state_everywhere(mc, NAME) == ("Deleting", "Deleting")
    shown = mc("status", NAME)
    assert "State:       Deleting" in shown.stdout and f"minicluster down {NAME}" in shown.stdout
    scaled = mc("scale", NAME, "1")  # nothing acts on a cluster that is going
    assert scaled.returncode == 1 and "being deleted" in scaled.stderr

    again = mc("up", str(machine.state_dir / f"{NAME}.yaml"), "--detach")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already" not in again.stdout + again.stderr
    assert "finishing the teardown" in again.stderr
    assert _state_everywhere(mc, NAME) == ("Running", "Running")
    assert not backend.store.load(NAME).deleting


def test_a_teardown_cut_short_is_finished_by_down(
    mc: Any, machine: Any, running_up: Up, waiter: Any, backend: LocalBackend
) -> None:
    up = running_up
    _interrupt_into_teardown(up, waiter, backend)
    up.proc.kill()
    up.wait()
    assert _state_everywhere(mc, NAME) == ("Deleting", "Deleting")
    down = mc("down", NAME)
    assert down.returncode == 0, down.stderr
    assert not backend.store.cluster_dir(NAME).exists()
    assert _state_everywhere(mc, NAME) == (None, "exit 1")
    assert machine.leftovers() == []
