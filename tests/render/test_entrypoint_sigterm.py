"""The entrypoint is the pod's PID 1: SIGTERM from the kubelet (or podman) must reach its brokers at once, or each
pod waits out its grace period (30 s on Kubernetes; `down` measured 31.7 s before this)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import yaml

from miniclusters.api import load_minicluster
from miniclusters.render.entrypoint import render_entrypoint
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _in_wait(pid: int) -> bool:
    """The shell `pid` is blocked in wait(2): its builtin `wait` for the backgrounded broker."""
    return Path(f"/proc/{pid}/wchan").read_text() == "do_wait"


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
        wait_until("the broker starts", lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=10)
        broker = int(pidfile.read_text())
        wait_until("the shell waits for the broker", lambda: _in_wait(pod.pid), timeout=10)
        pod.send_signal(signal.SIGTERM)
        pod.wait(timeout=10)
        wait_until("the broker ends with its pod's entrypoint", lambda: not _alive(broker), timeout=5)
        assert pod.returncode == 128 + signal.SIGTERM  # the broker's own end, passed on as the pod's exit code
        assert "SIGTERM: stopping" in (pod.stderr.read() if pod.stderr else "")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pod.pid, signal.SIGKILL)
