"""The cluster's processes: started detached (they outlive `minicluster kube up`), found again by pid file.

A pid file alone could name a recycled pid; a process counts as ours only while its command line still starts
with the component's program, so `down` never signals a stranger.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from common import atomic
from miniclusters.localkube.components import Component
from miniclusters.localkube.layout import Layout


def _pid_file(layout: Layout, name: str) -> Path:
    return layout.pids / f"{name}.pid"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _is_ours(pid: int, component: Component) -> bool:
    argv = _cmdline(pid)
    return bool(argv) and os.path.basename(argv[0]) == os.path.basename(component.argv[0])


def running_pid(layout: Layout, component: Component) -> int | None:
    """The component's pid while it runs, else None (a stale pid file is ignored)."""
    try:
        pid = int(_pid_file(layout, component.name).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_ours(pid, component) else None


def start(layout: Layout, component: Component, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start the component in its own session, its output appended to logs/NAME.log."""
    layout.logs.mkdir(parents=True, exist_ok=True)
    layout.pids.mkdir(parents=True, exist_ok=True)
    log = (layout.logs / f"{component.name}.log").open("ab")
    try:
        process = subprocess.Popen(
            component.argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
            close_fds=True,
        )
    finally:
        log.close()
    atomic.write_text(_pid_file(layout, component.name), f"{process.pid}\n")
    return process


def log_tail(layout: Layout, component: Component) -> str:
    """The last lines of the component's log, for an error message."""
    log = layout.logs / f"{component.name}.log"
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    return "\n".join(lines[-15:]) or "(no output)"


def stop(layout: Layout, component: Component, grace: float = 10.0) -> bool:
    """SIGTERM, then SIGKILL after `grace` seconds; True when the component was running."""
    pid = running_pid(layout, component)
    if pid is None:
        _pid_file(layout, component.name).unlink(missing_ok=True)
        return False
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _is_ours(pid, component):
        time.sleep(0.1)
    if _is_ours(pid, component):
        _signal_group(pid, signal.SIGKILL)
        _wait_gone(pid, 5.0, lambda: _is_ours(pid, component))
    _pid_file(layout, component.name).unlink(missing_ok=True)
    return True


def _signal_group(pid: int, signo: signal.Signals) -> None:
    """The component and whatever it started in its session (containerd's shims run in their own)."""
    try:
        os.killpg(pid, signo)
    except ProcessLookupError:
        return
    except PermissionError:
        os.kill(pid, signo)


def _wait_gone(pid: int, timeout: float, alive: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        time.sleep(0.05)
    # a zombie child of ours (a test that started it in this process) is reaped here
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
