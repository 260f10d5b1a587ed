"""Helpers for tests of the broker and modules built on it.

Free loopback ports, rendered configs, broker processes that never outlive a test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from broker.client import Handle
from broker.curve_cert import generate_certificate, render_zcert

FLUX = str(Path(sys.executable).with_name("flux"))
FAST = ["-Sheartbeat.interval=0.1", "-Sheartbeat.timeout=1"]


def kill_orphans(uri: str, below: bool = False) -> None:
    """Tasks of a SIGKILLed broker outlive it here (on a real node they die with the pod): end those of `uri`,
    or with `below` those of every instance whose URI starts with it (sub-instances' rundirs lie inside)."""
    wanted = f"FLUX_URI={uri}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(v == wanted or (below and v.startswith(wanted)) for v in environ):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def require_tool(tool: str, install: str) -> None:
    """In tests: skip without `tool` on a developer machine, but fail under CI, where `make test` installs it."""
    import shutil

    if shutil.which(tool) is None:
        _missing(f"{tool} is not installed (Debian: apt-get install {install})")


def require_path(path: Path, install: str) -> None:
    """As require_tool, for a file or directory a Debian package provides (an example case, a data set)."""
    if not path.exists():
        _missing(f"{path} is missing (Debian: apt-get install {install})")


def _missing(reason: str) -> None:
    import pytest

    if os.environ.get("CI"):
        pytest.fail(f"{reason}; `make test` should have installed it")
    pytest.skip(reason)


# Open MPI on one machine, for tests and benchmarks: TCP over loopback only (other work here creates network
# namespaces and bridges), allowed as root, yielding when idle (ranks outnumber the cores).
LOOPBACK_MPI_ENV = {
    "OMPI_MCA_btl": "tcp,self",
    "OMPI_MCA_btl_tcp_if_include": "lo",
    "OMPI_MCA_oob_tcp_if_include": "lo",
    "OMPI_MCA_mpi_yield_when_idle": "1",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
}


def wait_for(predicate: Callable[[], object], timeout: float = 15.0, interval: float = 0.02) -> object:
    """Poll until predicate() is truthy; fail the test with a clear message on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def addr(rank: int) -> str:
    return f"127.0.0.{rank + 1}"


@dataclass
class Instance:
    """A rendered config directory for `size` hosts named node0..node{size-1} on 127.0.0.x."""

    root: Path
    hosts: list[str]
    confdir: Path
    cert: Path
    procs: dict[int, subprocess.Popen[str]] = field(default_factory=dict)

    def rundir(self, rank: int) -> Path:
        return self.root / f"run{rank}"

    def uri(self, rank: int) -> str:
        return f"local://{self.rundir(rank)}/local"

    def start(
        self,
        rank: int,
        *extra: str,
        command: list[str] | None = None,
        cert: Path | None = None,
        heartbeat: tuple[str, ...] = tuple(FAST),
    ) -> subprocess.Popen[str]:
        """Start the broker of `rank`; `heartbeat=()` keeps the broker's own heartbeat defaults."""
        confdir = self.confdir
        if cert is not None:  # same hosts, another certificate
            confdir = self.root / f"conf-alt{rank}"
            confdir.mkdir(exist_ok=True)
            text = (self.confdir / "bootstrap.toml").read_text().replace(str(self.cert), str(cert))
            (confdir / "bootstrap.toml").write_text(text)
        args = [
            FLUX,
            "broker",
            f"--config-path={confdir}",
            f"--hostname={self.hosts[rank]}",
            f"-Srundir={self.rundir(rank)}",
            *heartbeat,
            *extra,
        ]
        if command:
            args += ["--", *command]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs[rank] = proc
        return proc

    def handle(self, rank: int, timeout: float = 15.0) -> Handle:
        sock = self.rundir(rank) / "local"
        wait_for(sock.exists, timeout)
        return Handle(self.uri(rank))

    def states(self) -> dict[int, str]:
        with self.handle(0) as h:
            status = h.rpc("overlay.status", nodeid=0, timeout=10)
        return {entry["rank"]: entry["state"] for entry in status["ranks"]}

    def wait_states(self, expected: dict[int, str], timeout: float = 15.0) -> None:
        def ok() -> bool:
            states = self.states()
            return all(states[r] == s for r, s in expected.items())

        wait_for(ok, timeout, interval=0.05)

    def kill(self, rank: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[rank]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)

    def cleanup(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        # what the brokers' jobs started, sub-instances included: a failed test left a nested batch running,
        # which skewed the duty cycles the next test measured
        kill_orphans(f"local://{self.root}/", below=True)


def render_instance(
    root: Path, size: int, per_host: dict[str, object] | None = None, port: int | None = None
) -> Instance:
    hosts = [f"node{i}" for i in range(size)]
    cert = root / "curve.cert"
    cert.write_text(render_zcert(generate_certificate("test")))
    entries = []
    for rank, host in enumerate(hosts):
        uri = f"tcp://{addr(rank)}:{port if port and rank == 0 else free_port(addr(rank))}"
        entries.append({"host": host, "bind": uri, "connect": uri, **(per_host or {})})
    confdir = root / "conf"
    confdir.mkdir()
    (confdir / "bootstrap.toml").write_text(tomli_w.dumps({"bootstrap": {"curve_cert": str(cert), "hosts": entries}}))
    return Instance(root, hosts, confdir, cert)


def run_flux(*args: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run the flux CLI to completion in its own session (killed with its whole group on timeout)."""
    proc = subprocess.Popen(
        [FLUX, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # no stray brokers
    if timed_out:
        out, err = proc.communicate()
        raise AssertionError(f"flux {' '.join(args)} timed out\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# (name, tar type, data, link target): one member of a hand-made queue archive.
ArchiveMember = tuple[str, bytes, bytes, str]


def pack_archive(path: Path, members: list[ArchiveMember], compress: bool = True) -> Path:
    """A queue archive (broker/jobs/archive.py) holding `members` beside an empty journal, every regular member
    listed in its manifest with its true sha256: without the member checks it would pass every other check."""
    import hashlib
    import io
    import json
    import tarfile

    from broker.jobs.archive import FORMAT_VERSION, KIND
    from broker.jobs.archive_members import MANIFEST
    from broker.jobs.store import JOURNAL_FILE

    regular = {name: data for name, kind, data, _ in members if kind == tarfile.REGTYPE}
    regular.setdefault(JOURNAL_FILE, b"")
    files = {name: hashlib.sha256(data).hexdigest() for name, data in regular.items()}
    manifest = {"kind": KIND, "format": FORMAT_VERSION, "created": 1.0, "source": {}, "jobs": [], "files": files}
    journal = [] if any(m[0] == JOURNAL_FILE for m in members) else [(JOURNAL_FILE, tarfile.REGTYPE, b"", "")]
    entries = [(MANIFEST, tarfile.REGTYPE, json.dumps(manifest).encode(), ""), *journal, *members]
    with tarfile.open(path, "w:gz" if compress else "w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, data, link in entries:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return path
