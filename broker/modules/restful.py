"""Start the REST API on the lead broker when asked (`-Srestful.port=5000`), and stop it with the broker.

The server is a separate process (uvicorn) that talks to the instance through the local socket, so a slow or
hostile HTTP client can never stall the broker's event loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..port import ModulePort

PORT_ATTRIBUTE = "restful.port"
HOST_ATTRIBUTE = "restful.host"


def restful(b: ModulePort) -> None:
    port = b.attrs.get(PORT_ATTRIBUTE)
    if b.rank != 0 or not port:
        return
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"-S{PORT_ATTRIBUTE}={port!r}: expected a TCP port number")
    processes: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        argv = [sys.executable, "-m", "broker.rest.server", "--port", port, "--uri", b.local_uri]
        argv += ["--state-dir", os.path.join(b.attrs.get("statedir") or b.rundir, "restful")]
        host = b.attrs.get(HOST_ATTRIBUTE)
        if host:
            argv += ["--host", host]
        env = dict(os.environ, FLUX_URI=b.local_uri)
        processes.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL))

    def stop() -> None:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    b.on_online(start)
    b.on_close(stop)
