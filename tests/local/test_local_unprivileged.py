"""The unprivileged path (forced with MINICLUSTERS_LOCAL_UNPRIVILEGED=1, not by dropping root): plain processes on
127.213.<slot>.x addresses, brokers told their pod name, nice levels for CPU weight, a one-line notice."""

from __future__ import annotations

import json
import os
from typing import Any

from elasticity.model import cpu as cpu_model
from miniclusters.backends.local import netns, process
from miniclusters.backends.local.backend import LocalBackend

UNPRIVILEGED = {"MINICLUSTERS_LOCAL_UNPRIVILEGED": "1"}


def test_unprivileged_cluster_joins_on_loopback_and_renices(mc, machine: Any, spec_writer: Any, waiter: Any) -> None:
    spec = spec_writer(machine.state_dir, "plain", size=2, max_size=3, cpu="500m")
    before = netns.list_namespaces() if os.geteuid() == 0 else set()
    up = mc("up", str(spec), "--detach", env=UNPRIVILEGED)
    assert up.returncode == 0, up.stderr
    notices = [line for line in up.stderr.splitlines() if line.startswith("notice:")]
    assert len(notices) == 1 and "sharing this machine's network, hostname and CPU cgroup" in notices[0]
    if os.geteuid() == 0:
        assert netns.list_namespaces() == before  # no namespaces in this mode

    status = json.loads(mc("status", "plain", "-o", "json", env=UNPRIVILEGED).stdout)
    assert status["ranks_up"] == [0, 1]
    isolation = next(c for c in status["conditions"] if c["type"] == "Isolation")
    assert isolation["status"] == "False" and isolation["reason"] == "SharedHost"
    assert [p["cpu_actual"] for p in status["pods"]] == ["500m", "500m"]
    host = mc("exec", "plain", "-i", "1", "--", "flux", "getattr", "hostname", env=UNPRIVILEGED)
    assert host.returncode == 0 and host.stdout.strip() == "plain-1"

    backend = LocalBackend(state_dir=machine.state_dir, unprivileged=True, notify=lambda _m: None)
    record = backend.store.load("plain")
    assert record.mode == "process" and record.pods[1].address.startswith("127.213.")
    assert backend.kernel_weight("plain", 1) == ("nice", cpu_model.milli_to_nice(500))

    pid = record.pods[1].pid
    resize = mc("resize", "plain", "1", "--cpu", "250m", env=UNPRIVILEGED)
    assert resize.returncode == 0 and "nice level" in resize.stdout, resize.stdout + resize.stderr
    tag = process.tag_for(backend.store.cluster_dir("plain"), 1)
    assert all(os.getpriority(os.PRIO_PROCESS, p) == cpu_model.milli_to_nice(250) for p in process.tagged(tag))
    assert backend.store.load("plain").pods[1].pid == pid  # not restarted

    grow = mc("scale", "plain", "3", env=UNPRIVILEGED)
    assert grow.returncode == 0, grow.stderr
    assert waiter(
        lambda: json.loads(mc("status", "plain", "-o", "json", env=UNPRIVILEGED).stdout)["ranks_up"] == [0, 1, 2],
        timeout=20,
    )
    assert mc("down", "plain", env=UNPRIVILEGED).returncode == 0
    assert not process.tagged(f"{machine.state_dir}/", prefix=True)


def test_latency_needs_namespaces(mc, machine: Any, spec_writer: Any) -> None:
    spec = spec_writer(machine.state_dir, "platency", size=1, max_size=1, min_size=0)
    result = mc("up", str(spec), "--latency", "2ms", env=UNPRIVILEGED)
    assert result.returncode == 2 and "network emulation needs root" in result.stderr
    assert mc("list").stdout.count("platency") == 0
