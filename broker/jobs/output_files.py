"""A job's --output/--error files, written line by line as the output arrives (so `tail -f` follows the job).

Flux's shell writes these files while the job runs; writing them only at the end left users staring at an
empty or missing file for the whole of a long batch job.
"""

from __future__ import annotations

import contextlib
import os
from typing import IO, TYPE_CHECKING, Any

from broker.jobs.jobid import encode_f58

if TYPE_CHECKING:
    from broker.jobs.shapes import Jobspec


def file_targets(jobspec: Jobspec, jobid: int) -> dict[str, str]:
    """{stream: path} from the jobspec's shell output options ({{id}} expands as in Flux); stderr follows stdout."""
    options = jobspec.get("attributes", {}).get("system", {}).get("shell", {}).get("options", {})
    output = options.get("output", {}) if isinstance(options, dict) else {}
    targets: dict[str, str] = {}
    if not isinstance(output, dict):
        return targets
    cwd = jobspec.get("attributes", {}).get("system", {}).get("cwd")
    for stream in ("stdout", "stderr"):
        spec = output.get(stream)
        path = spec.get("path") if isinstance(spec, dict) else None
        if isinstance(path, str) and path:
            f58 = encode_f58(jobid)
            path = path.replace("{{id}}", f58).replace("{{jobid}}", f58)
            # relative to the job's working directory, as Flux's shell opens it (not the broker's)
            targets[stream] = os.path.join(cwd, path) if isinstance(cwd, str) and cwd else path
    if "stdout" in targets and "stderr" not in targets:
        targets["stderr"] = targets["stdout"]
    return targets


class OutputFiles:
    """The open files of one job; every write is flushed. A failure is kept in `error` (said once by the job
    manager, as a job exception: fatal when a file cannot be opened, as for Flux's shell) and later writes are
    skipped; the output itself stays in the job's store for `flux job attach`."""

    def __init__(self, jobid: int, targets: dict[str, str]) -> None:
        self.jobid = jobid
        self.targets = targets
        self.handles: dict[str, IO[str]] = {}
        self.error: str | None = None
        try:
            for path in targets.values():
                if path not in self.handles:
                    self.handles[path] = open(path, "w", encoding="utf-8")  # noqa: SIM115 - open for the job's life
        except OSError as exc:
            self._fail("cannot open", exc)

    @property
    def failed(self) -> bool:
        return self.error is not None

    def _fail(self, doing: str, exc: OSError, path: str | None = None) -> None:
        if self.error is None:
            where = path or exc.filename
            self.error = f"{doing} output file{f' {where}' if where else ''}: {exc.strerror or exc}"
        self.close()

    def write(self, lines: list[list[Any]]) -> None:
        if self.failed:
            return
        touched: set[str] = set()
        path: str | None = None
        try:
            for stream, _task, text in lines:
                path = self.targets.get(stream)
                if path is not None:
                    self.handles[path].write(text)
                    touched.add(path)
            for path in touched:
                self.handles[path].flush()
        except OSError as exc:
            self._fail("cannot write", exc, path)

    def close(self) -> None:
        for handle in self.handles.values():
            with contextlib.suppress(OSError):
                handle.close()
        self.handles.clear()
