"""Simulations whose files live in the pods only: read through exec, for a controller outside them (the operator).

FluxSimulations reads each simulation's progress lines and PMPI traces from a work directory this process
shares with the pods (the local backend). An operator pod shares nothing with the MiniCluster's pods, so here
the directories are made, the progress lines read (`cat`, in the lead pod: rank 0's pod writes them) and the
traces copied (`base64`, from every pod: each rank writes its trace where it runs, so no shared volume is
needed for them) through `Backend.exec`, the one way controllers reach pods. The copies go to a cache here, where
the same trace reader as everywhere analyses them.
"""

from __future__ import annotations

import base64
import binascii
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from miniclusters.backends.base import BackendError
from miniclusters.multiplex.flux_simulations import FluxSimulations

FETCH_TRACES = (
    'cd "$1" 2>/dev/null || exit 0; for f in pmpi.*.bin; do [ -f "$f" ] || continue; '
    'printf "%s " "$f"; base64 "$f" | tr -d "\\n"; echo; done'
)
"""Every trace file in the directory $1 as `NAME BASE64` lines (nothing when the directory is not there yet)."""


@dataclass
class ExecSimulations(FluxSimulations):
    cache: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mc-mux-cache-")))
    """Where this process keeps its copies of the traces and its notes."""

    def pods(self) -> list[int]:
        return sorted(set(self.pod_of_host.values())) or [0]

    def prepare(self, directory: Path) -> None:
        for pod in self.pods():
            try:
                result = self.backend.exec(self.cluster, pod, ["mkdir", "-p", str(directory)])
            except BackendError:
                continue  # a pod that does not answer: its ranks' traces will be missing, the profile waits
            if result.rc != 0 and pod == 0:
                raise BackendError(f"mkdir -p {directory} in the lead pod exited {result.rc}: {result.stderr.strip()}")

    def note(self, sim: str, name: str, text: str) -> None:
        folder = self.cache / sim
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text + "\n")

    def read_text(self, path: Path) -> str:
        try:
            result = self.backend.exec(self.cluster, 0, ["cat", str(path)])
        except BackendError as exc:
            raise OSError(str(exc)) from None
        if result.rc != 0:
            raise OSError(result.stderr.strip() or f"cat {path} exited {result.rc}")
        return result.stdout

    def trace_dir(self, sim: str) -> Path:
        local = self.cache / self.sim_dir(sim).name / "pmpi"  # one folder per attempt
        local.mkdir(parents=True, exist_ok=True)
        if sim in self.profiles:
            return local
        remote = self.sim_dir(sim) / "pmpi"
        for pod in self.pods():
            try:
                result = self.backend.exec(self.cluster, pod, ["sh", "-c", FETCH_TRACES, "sh", str(remote)])
            except BackendError:
                continue
            if result.rc == 0:
                self._store(local, result.stdout)
        return local

    @staticmethod
    def _store(local: Path, listing: str) -> None:
        for line in listing.splitlines():
            name, _, data = line.partition(" ")
            if not name.startswith("pmpi.") or "/" in name:
                continue
            try:
                (local / name).write_bytes(base64.b64decode(data, validate=True))
            except (binascii.Error, ValueError):
                continue  # cut short: copied again next look
