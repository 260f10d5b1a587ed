"""The `podman` command, as the backend calls it: one thin shell, every failure a BackendError in words.

podman's defaults do not run containers on every machine (crun refuses cgroup v1 hybrid mode; root's default
RLIMIT_NOFILE/NPROC may exceed what the kernel grants): unless $CONTAINERS_CONF is set, the repository's
images/containers.conf (runc, cgroupfs, capped rlimits) is used when it exists.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from miniclusters.backends.base import BackendError, UnreachableError

CONTAINERS_CONF = Path(__file__).resolve().parents[3] / "images" / "containers.conf"
PODMAN_ENV = "MINICLUSTERS_PODMAN"
"""Which podman binary to run (default: `podman` on PATH)."""


class PodmanError(BackendError):
    """A podman command failed; the message names the command and quotes podman's words."""

    def __init__(self, doing: str, argv: Sequence[str], rc: int, stderr: str) -> None:
        words = _last_error(stderr)
        super().__init__(f"{doing}: `podman {' '.join(argv[:3])} ...` exited {rc}: {words}")
        self.rc = rc
        self.stderr = stderr


def _last_error(stderr: str) -> str:
    """podman's own message (its `Error: ...` line), not the warnings before it."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("Error:")]
    if not errors:
        return lines[-1] if lines else "no message"
    words = lines[errors[-1]].removeprefix("Error: ")
    listed = [line.removeprefix("* ") for line in lines[errors[-1] + 1 :] if line.startswith("* ")]
    return f"{words} {'; '.join(listed)}" if listed else words  # "2 errors occurred:" names them after it


class Podman:
    """Runs podman with our containers.conf; `json` parses `--format json` answers."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or os.environ.get(PODMAN_ENV, "podman")
        if shutil.which(self.binary) is None:
            raise UnreachableError(
                f"the podman backend needs podman, which is not installed (`{self.binary}` not on PATH); "
                "install it with `make images-deps` (Debian: apt-get install podman runc catatonit)"
            )
        self.env = dict(os.environ)
        if "CONTAINERS_CONF" not in self.env and CONTAINERS_CONF.exists():
            self.env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)

    def run(
        self, argv: Sequence[str], doing: str, check: bool = True, timeout: float = 600.0, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                [self.binary, *argv],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
                input=stdin,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise BackendError(f"{doing}: `podman {' '.join(argv[:3])} ...` did not answer in {timeout:.0f}s") from None
        if check and done.returncode != 0:
            raise PodmanError(doing, argv, done.returncode, done.stderr)
        return done

    def start(self, argv: Sequence[str]) -> subprocess.Popen[str]:
        """A podman command left running (kube play in parallel, logs --follow); stderr joins stdout."""
        return subprocess.Popen(
            [self.binary, *argv],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )

    def json(self, argv: Sequence[str], doing: str) -> Any:
        out = self.run(argv, doing).stdout.strip()
        return json.loads(out) if out else []

    def lines(self, argv: Sequence[str]) -> Iterator[str]:
        """Output lines of a long-running command (`logs --follow`) as they come."""
        process = self.start(argv)
        assert process.stdout is not None
        try:
            for line in process.stdout:
                yield line.rstrip("\n")
        finally:
            if process.poll() is None:
                process.terminate()
            process.wait()
