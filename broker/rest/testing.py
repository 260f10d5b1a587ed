"""Test and bench support: a real instance whose lead broker starts the real REST server (uvicorn); a real
flux-core instance with our server's flux flavour or the reference server (flux-restful 1.1.0) in front of it."""

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
from typing import Any

import httpx

FLUX = str(Path(sys.executable).with_name("flux"))  # our `flux` (the built-in broker's CLI), beside this Python
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

    @property
    def flux_command(self) -> list[str]:
        """`flux` talking to this instance (as a user inside it would: FLUX_URI), for commands the REST API lacks."""
        uri = (self.statedir.parent / "uri").read_text().strip()
        return ["env", f"FLUX_URI={uri}", FLUX]


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
        [FLUX, "start", f"--test-size={size}", "-o", options, "sh", "-c", f'echo "$FLUX_URI" > {tmp}/uri; sleep 3600'],
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


# ------------------------------------------------------------------ real flux-core and the servers in front of it
def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Stop a process started with start_new_session and everything it started."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def real_flux(flux: Path, bindings: Path, root: Path, size: int = 2) -> Iterator[dict[str, str]]:
    """A real flux-core instance (`flux start --test-size`) and the environment that reaches it: FLUX_URI, its
    Python bindings on PYTHONPATH, its `flux` first on PATH, and the REST servers' credentials."""
    uri_file = root / "uri"
    log = open(root / "flux.log", "wb")  # noqa: SIM115 - kept for the instance's lifetime
    process = subprocess.Popen(
        [str(flux), "start", f"--test-size={size}", "sh", "-c", f"echo $FLUX_URI > {uri_file}; sleep 3600"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not uri_file.exists() or not uri_file.read_text().strip():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"flux-core did not start:\n{(root / 'flux.log').read_text()[-3000:]}")
            time.sleep(0.1)
        yield dict(
            os.environ,
            FLUX_URI=uri_file.read_text().strip(),
            PYTHONPATH=os.pathsep.join(filter(None, [str(bindings), os.environ.get("PYTHONPATH", "")])),
            PATH=os.pathsep.join([str(flux.parent), os.environ.get("PATH", "")]),
            FLUX_USER=SUPERUSER[0],
            FLUX_TOKEN=SUPERUSER[1],
            FLUX_SECRET_KEY=SECRET_KEY,
            FLUX_TOKEN_SIGNING_KEY=SIGNING_KEY,
        )
    finally:
        kill_group(process)
        log.close()


@contextlib.contextmanager
def serve(command: list[str], env: dict[str, str], cwd: Path, log_name: str) -> Iterator[str]:
    """Run an HTTP server (`{port}` in `command` becomes a free port) until it answers; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = cwd / log_name
    log = open(log_path, "wb")  # noqa: SIM115 - kept for the server's lifetime
    process = subprocess.Popen(
        [word.replace("{port}", str(port)) for word in command],
        env=env,
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield url
    finally:
        kill_group(process)
        log.close()


@contextlib.contextmanager
def reference_server(flux_env: dict[str, str], cwd: Path) -> Iterator[str]:
    """flux-restful 1.1.0 (PyPI) on a real flux-core instance, as its README runs it: a user database, then
    uvicorn; auth on, the superuser from FLUX_USER/FLUX_TOKEN."""
    env = dict(flux_env, FLUX_REQUIRE_AUTH="true", FLUX_NUMBER_NODES="2")
    init = "from flux_restful.db.init_db import init_db; init_db()"  # its sqlite database is ./flux-restful.db
    subprocess.run([sys.executable, "-c", init], env=env, cwd=cwd, check=True, capture_output=True, timeout=60)
    command = [sys.executable, "-m", "uvicorn", "flux_restful.main:app", "--host", "127.0.0.1", "--port", "{port}"]
    with serve(command, env, cwd, "reference.log") as url:
        yield url


@contextlib.contextmanager
def flux_flavour_server(flux_env: dict[str, str], cwd: Path) -> Iterator[str]:
    """Our server, flux flavour, on a real flux-core instance."""
    command = [FLUX, "restful", "serve", "--flavour", "flux", "--host", "127.0.0.1", "--port", "{port}"]
    with serve([*command, "--state-dir", str(cwd / "state")], flux_env, cwd, "ours.log") as url:
        yield url


def listening_pid(port: int) -> int | None:
    """The process that listens on this TCP port on this machine (its RSS is the server's), None if not found."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return int(pid)
    return None


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@contextlib.contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """An ASGI app behind a real uvicorn server in a thread of this process (one event loop, as in production,
    so a blocking call on it shows); yields its URL."""
    import threading

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
