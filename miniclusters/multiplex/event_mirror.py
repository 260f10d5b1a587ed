"""The controller's event log, also written into the lead pod at `<lead REST state_dir>/controllers/multiplex.jsonl`.

That is where the lead's REST server (and its web UI's /cluster page) finds what the controller decided, whoever
runs it: the host CLI, the controller `minicluster up` started, or the operator. The REST server's state
directory is `<statedir>/restful` under the built-in broker (broker/modules/restful.py: the entrypoint gives the
lead `-Sstatedir=<run>/state`) and `<rundir>/restful` beside flux-core (broker/rest/server.py's default next to
the socket). The local backend's pods share this machine's file system, so the mirror is a file append; a
Kubernetes pod's file system is reachable only through exec, so there each step's new lines go in one exec.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from elasticity.control.events import EventLog, EventRecord
from miniclusters.backends.base import Backend, BackendError
from miniclusters.render.layout import RUN_DIR

log = logging.getLogger("miniclusters.multiplex")
CONTROLLERS_DIR = "controllers"
LOG_NAME = "multiplex.jsonl"
MAX_BUFFERED = 5000
"""Lines kept for a lead that does not answer; older ones are dropped (the controller's own log has them all)."""


def rest_state_subdir(flavour: str) -> str:
    """Where the lead's REST server keeps its state, relative to the pod's run directory."""
    return "rundir/restful" if flavour == "flux" else "state/restful"


def lead_log_path(run_dir: Path | str, flavour: str) -> Path:
    return Path(run_dir) / rest_state_subdir(flavour) / CONTROLLERS_DIR / LOG_NAME


class Mirror(Protocol):
    def append(self, line: str) -> None: ...

    def flush(self) -> None: ...


class FileMirror:
    """Append to a file this process can reach (the local backend's lead pod directory)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, line: str) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:  # the pod is gone or its directory not there yet: the controller's own log has it
            log.debug("could not mirror an event to %s: %s", self.path, exc)

    def flush(self) -> None:
        return None


class ExecMirror:
    """Append through `sh -c` exec'd in the lead pod, the lines passed as an argument (exec has no stdin here);
    lines that could not be written wait for the next flush."""

    SCRIPT = 'mkdir -p "$(dirname "$1")" && printf "%s" "$2" >> "$1"'

    def __init__(self, backend: Backend, cluster: str, path: Path) -> None:
        self.backend = backend
        self.cluster = cluster
        self.path = path
        self.pending: list[str] = []

    def append(self, line: str) -> None:
        self.pending.append(line)
        del self.pending[:-MAX_BUFFERED]

    def flush(self) -> None:
        if not self.pending:
            return
        text = "".join(line + "\n" for line in self.pending)
        argv = ["sh", "-c", self.SCRIPT, "sh", str(self.path), text]
        try:
            result = self.backend.exec(self.cluster, 0, argv)
        except BackendError as exc:
            log.warning("%s: could not write events to the lead's %s: %s", self.cluster, self.path, exc)
            return
        if result.rc != 0:
            log.warning("%s: writing %s in the lead exited %d: %s", self.cluster, self.path, result.rc, result.stderr)
            return
        self.pending.clear()


class MirroredEventLog(EventLog):
    """An EventLog whose every record also goes to the lead's copy."""

    def __init__(self, target: Path | str, loop: str, clock: Callable[[], float], mirror: Mirror | None) -> None:
        super().__init__(target, loop, clock)
        self.mirror = mirror

    def write(self, kind: str, cluster: str = "", **fields: Any) -> EventRecord:
        record = super().write(kind, cluster, **fields)
        if self.mirror is not None:
            self.mirror.append(json.dumps(record, default=str))
        return record

    def __enter__(self) -> MirroredEventLog:
        return self

    def flush_mirror(self) -> None:
        if self.mirror is not None:
            self.mirror.flush()


def mirror_for(backend: Backend, backend_name: str, cluster: str, flavour: str) -> Mirror | None:
    """The lead's copy of the event log on this backend (None when the lead cannot be reached)."""
    store = getattr(backend, "store", None)
    if backend_name == "local" and store is not None:
        return FileMirror(lead_log_path(store.pod_dir(cluster, 0) / "run", flavour))
    if backend_name == "kubernetes":
        return ExecMirror(backend, cluster, lead_log_path(RUN_DIR, flavour))
    return None
