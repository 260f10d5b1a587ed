"""Test support: a real instance whose lead broker starts the real REST server (uvicorn)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

FLUX = str(Path(sys.executable).with_name("flux"))
SIGNING_KEY = "test-token-signing-key-0123456789abcdef0123456789"
SECRET_KEY = "test-shared-handshake-secret-0123456789abcdef"
SUPERUSER = ("admin", "admin-password")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    statedir: Path
    process: subprocess.Popen[bytes]


def start_server(tmp: Path, size: int = 2, **env_extra: str) -> Iterator[Server]:
    port = free_port()
    statedir = tmp / "state"
    env = dict(
        os.environ,
        FLUX_USER=SUPERUSER[0],
        FLUX_TOKEN=SUPERUSER[1],
        FLUX_SECRET_KEY=SECRET_KEY,
        FLUX_TOKEN_SIGNING_KEY=SIGNING_KEY,
        **env_extra,
    )
    options = f"-Srestful.port={port},-Srestful.host=127.0.0.1,-Sstatedir={statedir}"
    log = open(tmp / "instance.log", "wb")  # noqa: SIM115 - kept for the instance's lifetime
    process = subprocess.Popen(
        [FLUX, "start", f"--test-size={size}", "-o", options, "sleep", "3600"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            log.close()
            raise RuntimeError(f"REST server did not come up:\n{(tmp / 'instance.log').read_text()[-3000:]}")
        time.sleep(0.1)
    try:
        yield Server(url, statedir, process)
    finally:
        for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, None)):
            # the whole group (brokers, the REST server, jobs); it may be gone already (/v1/service/stop)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()
