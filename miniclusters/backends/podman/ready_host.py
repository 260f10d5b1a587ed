"""Waiting for a podman cluster's brokers from this machine: the lead pod's run directory is a podman volume, so
its broker's local socket is a file here too, and one connection asks the lead's overlay every 0.02 s until
every rank has joined. No `podman exec` and no process started in the pod (the in-lead wait of ready.py cost
0.25-0.6 s of a 4-pod `up`: the exec, then the bundle's interpreter starting); that wait stays the fallback.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from broker.client import Handle
from miniclusters.backends.base import BackendError
from miniclusters.backends.overlay import Ranks
from miniclusters.render.layout import LOCAL_SOCKETS

POLL_S = 0.02
"""Between looks for the socket, and between asks (an `overlay.status` costs the lead about a millisecond): the
last broker's join is seen 10 ms after it on average, where 0.05 s made it 25."""
ASK_TIMEOUT_S = 5.0
IPC_PATH_MAX = 100
"""A Unix socket's path is at most 107 bytes: a longer one is reached through a short symlink to its directory."""


def ranks_of(answer: object) -> Ranks:
    """(up, down) from an `overlay.status` answer (`{"ranks": [{"rank": 0, "state": "up"}, ...]}`)."""
    listed = answer.get("ranks", []) if isinstance(answer, dict) else []
    up = tuple(sorted(int(r["rank"]) for r in listed if r.get("state") == "up"))
    down = tuple(sorted(int(r["rank"]) for r in listed if r.get("state") != "up"))
    return up, down


@contextlib.contextmanager
def _reachable(socket: Path) -> Iterator[Path]:
    if len(str(socket)) <= IPC_PATH_MAX:
        yield socket
        return
    links = Path(tempfile.mkdtemp(prefix="mc-"))
    try:
        (links / "d").symlink_to(socket.parent)
        yield links / "d" / socket.name
    finally:
        shutil.rmtree(links, ignore_errors=True)


def await_from_host(
    rundir: Path, size: int, timeout: float, clock: Callable[[], float], sleep: Callable[[float], None]
) -> Ranks | None:
    """The lead's ranks once `size` have joined; None when `timeout` passes first; BackendError when its socket
    is there but does not answer (the caller then waits inside the lead instead)."""
    deadline = clock() + timeout
    while clock() < deadline:
        socket = next((rundir / n for n in LOCAL_SOCKETS if (rundir / n).exists()), None)
        if socket is not None:
            return _ask_until_up(socket, size, deadline, clock, sleep)
        sleep(POLL_S)
    return None


def _ask_until_up(
    socket: Path, size: int, deadline: float, clock: Callable[[], float], sleep: Callable[[float], None]
) -> Ranks | None:
    try:
        with _reachable(socket) as path, Handle(f"local://{path}") as handle:
            while clock() < deadline:
                ranks = ranks_of(handle.rpc("overlay.status", timeout=ASK_TIMEOUT_S))
                if len(ranks[0]) >= size:
                    return ranks
                sleep(POLL_S)
    except Exception as exc:  # the fast path's edge: whatever failed, the in-lead wait takes over
        raise BackendError(f"the lead broker's socket {socket} did not answer: {exc}") from None
    return None
