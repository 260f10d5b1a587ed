"""The processes of a local pod, read from /proc: what the kill tests aim at (a broker, not its supervisor)."""

from __future__ import annotations

import os
from pathlib import Path


def session_processes(supervisor: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live process in the session a pod's supervisor leads."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # it ended while the table was read
        if int(stat[3]) == supervisor and stat[0] not in ("Z", "X"):
            found.append((int(entry), cmdline))
    return found


def brokers_of(supervisor: int) -> list[int]:
    """The live `flux start` processes of a pod's session (one, while the pod runs)."""
    return [pid for pid, cmdline in session_processes(supervisor) if "flux start" in cmdline]


def broker_of(supervisor: int) -> int:
    """The one broker of a running local pod; AssertionError naming what was found otherwise."""
    found = brokers_of(supervisor)
    assert len(found) == 1, f"pod supervisor {supervisor}: brokers {found}"
    return found[0]
