"""The entrypoint is the pod's PID 1: SIGTERM from the kubelet (or podman) must reach its brokers at once, or each
pod waits out its grace period (30 s on Kubernetes; `down` measured 31.7 s before this)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

from miniclusters.api import load_minicluster
from miniclusters.render.entrypoint import render_entrypoint

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(check, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return state != "Z"


def test_sigterm_to_the_entrypoint_stops_the_broker_and_the_pod(tmp_path: Path) -> None:
    mc = load_minicluster(yaml.safe_load((ROOT / "examples" / "hello.yaml").read_text()))
    script = tmp_path / "entrypoint.sh"
    script.write_text(render_entrypoint(mc))
    bindir = tmp_path / "broker" / "bin"
    bindir.mkdir(parents=True)
    pidfile = tmp_path / "broker.pid"
    fake_flux = bindir / "flux"  # a broker that runs until it is signalled
    fake_flux.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 300\n")
    fake_flux.chmod(0o755)
    env = dict(
        os.environ,
        JOB_COMPLETION_INDEX="1",
        MINICLUSTER_BROKER_DIR=str(tmp_path / "broker"),
        MINICLUSTER_RUN_DIR=str(tmp_path / "run"),
        MINICLUSTER_CONFIG_DIR=str(tmp_path / "config"),
    )
    pod = subprocess.Popen(["bash", str(script)], env=env, start_new_session=True, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip()), "the broker never started"
        broker = int(pidfile.read_text())
        time.sleep(0.2)  # the shell is in its wait by now
        pod.send_signal(signal.SIGTERM)
        pod.wait(timeout=10)
        assert _wait_for(lambda: not _alive(broker), timeout=5), "the broker outlived its pod's entrypoint"
        assert pod.returncode == 128 + signal.SIGTERM  # the broker's own end, passed on as the pod's exit code
        assert "SIGTERM: stopping" in (pod.stderr.read() if pod.stderr else "")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pod.pid, signal.SIGKILL)
