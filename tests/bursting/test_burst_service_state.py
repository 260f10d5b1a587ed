"""The burst service's own state, as a real lead knows it: a service that cannot start says why, a killed one is
seen stopped, and a burstable job too big for the instance says in `flux jobs` why no burst comes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.burst_service import DEFAULT_STALE_AFTER, ServiceReport, pending_note, service_view, service_words
from broker.client import FluxError
from broker.protocol import EINVAL
from broker.testing import FLUX, Instance, render_instance, wait_for
from bursting.reporter import STALE_AFTER
from miniclusters.backends.base import ExecResult
from miniclusters.cli.burst_status import burst_report, print_bursts


@pytest.fixture
def lead(tmp_path: Path) -> Iterator[Instance]:
    """A one-pod instance (its lead is the whole instance): every burstable -N3 job needs a burst."""
    inst = render_instance(tmp_path, 1)
    inst.start(0, "-Sresource.cores=0-1")
    inst.wait_states({0: "up"})
    yield inst
    inst.cleanup()


def _service(inst: Instance, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    spec = {"metadata": {"name": "c"}, "spec": {"flux": {"bursting": {"plugins": [{"name": "local", "size": 1}]}}}}
    context = tmp_path / "context.json"
    context.write_text(json.dumps({"cluster": "c", "spec": spec, "certificate": "", "options": {"state_dir": "/none"}}))
    argv = [sys.executable, "-m", "bursting.service", "--cluster", "c", "--uri", inst.uri(0)]
    argv += ["--state", str(tmp_path / "bursts.json"), "--context", str(context), *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _view(inst: Instance) -> dict[str, Any]:
    with inst.handle(0) as h:
        view: dict[str, Any] = h.rpc("overlay.status", nodeid=0)["burst_service"]
    return view


def _info(inst: Instance, jobid: str) -> str:
    env = dict(os.environ, FLUX_URI=inst.uri(0))
    done = subprocess.run([FLUX, "jobs", "-no", "{contextual_info}", jobid], capture_output=True, text=True, env=env)
    return done.stdout.strip()


def _submit_burstable(inst: Instance, nodes: int) -> str:
    env = dict(os.environ, FLUX_URI=inst.uri(0))
    argv = [FLUX, "submit", "--setattr=burstable", f"-N{nodes}", "true"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_service_that_cannot_start_tells_the_lead_why_and_the_waiting_job_says_so(
    lead: Instance, tmp_path: Path
) -> None:
    job = _submit_burstable(lead, 3)
    absent = "needs a burst, but the burst service is absent: none has reported to this lead"
    assert _info(lead, job).startswith(absent)  # no service at all: said, not an empty INFO column
    bad_idle = _service(lead, tmp_path, "--idle", "soon")
    assert bad_idle.wait(timeout=60) == 2
    assert _view(lead)["state"] == "failed" and "--idle: 'soon' is not a duration" in _view(lead)["reason"]
    no_plugin = _service(lead, tmp_path, "--plugins", "nope")
    assert no_plugin.wait(timeout=60) == 1
    view = _view(lead)
    assert view["state"] == "failed" and "cannot load its plugins: no burst plugin 'nope'" in view["reason"]
    assert _info(lead, job) == f"needs a burst, but the burst service is failed: {view['reason']}"


def test_a_killed_service_is_seen_stopped_and_the_waiting_job_says_so(lead: Instance, tmp_path: Path) -> None:
    job = _submit_burstable(lead, 3)  # more than `local` may bring here (size 1): the service says why
    proc = _service(lead, tmp_path, "--plugins", "local")
    refused = "burst of 2 node(s) not possible: local: 2 node(s) asked, this machine takes at most 1 burst pods"
    assert wait_for(lambda: _info(lead, job) == refused, timeout=60)
    assert _view(lead)["state"] == "running" and _view(lead)["pid"] == proc.pid
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert wait_for(lambda: _view(lead)["state"] == "stopped", timeout=STALE_AFTER + 15)
    assert "its process is gone or stuck" in _view(lead)["reason"]
    assert _info(lead, job).startswith("needs a burst, but the burst service is stopped: no report for ")


def test_a_second_service_of_the_same_bursts_is_refused_and_tells_the_lead_nothing(
    lead: Instance, tmp_path: Path
) -> None:
    """Two services of one cluster would both burst for the same job: the second is refused before it reports."""
    started = [_service(lead, tmp_path, "--plugins", "local")]
    first = started[0]
    try:
        assert wait_for(lambda: _view(lead)["state"] == "running" and _view(lead)["pid"] == first.pid, timeout=60)
        started.append(_service(lead, tmp_path, "--plugins", "local"))
        second = started[1]
        assert second.wait(timeout=60) == 1  # was: it ran beside the first
        assert second.stderr is not None
        assert f"another burst service serves these bursts: pid {first.pid} " in second.stderr.read()
        assert _view(lead)["state"] == "running" and _view(lead)["pid"] == first.pid  # the first's report stands
        assert first.poll() is None
    finally:
        for proc in started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_the_lead_checks_reports_and_takes_a_quiet_service_for_gone(lead: Instance) -> None:
    with lead.handle(0) as h:
        with pytest.raises(FluxError) as bad:
            h.rpc("overlay.burst-service", {"state": "sleeping"}, nodeid=0)
        assert bad.value.errnum == EINVAL and "state 'sleeping'" in str(bad.value)
        h.rpc("overlay.burst-service", {"state": "running", "pid": 42, "stale_after": 0.5}, nodeid=0)
        assert h.rpc("overlay.status", nodeid=0)["burst_service"]["state"] == "running"
    assert wait_for(lambda: _view(lead)["state"] == "stopped", timeout=10)


def test_the_words_are_the_same_everywhere() -> None:
    running = service_view(ServiceReport("running", "", 12, at=100.0), now=101.0)
    assert service_words(running) == "running (pid 12)" and pending_note(running) is None
    quiet = service_view(ServiceReport("running", "", 12, at=100.0), now=100.0 + DEFAULT_STALE_AFTER + 1)
    assert quiet["state"] == "stopped" and service_words(quiet).startswith("stopped: no report for 16 s")
    failed = service_view(ServiceReport("failed", "cannot load its plugins: x", 12, at=100.0), now=1000.0)
    assert service_words(failed) == "failed: cannot load its plugins: x"  # a failure does not go stale
    assert pending_note(failed) == "needs a burst, but the burst service is failed: cannot load its plugins: x"
    assert service_view(None, now=0.0)["state"] == "absent"


class _Backend:
    def __init__(self, service: dict[str, Any]) -> None:
        self.service = service

    def exec(self, name: str, index: int, argv: list[str], timeout: float = 3600.0) -> ExecResult:
        if argv[1] == "overlay":
            ranks = [{"rank": 0, "hostname": "c-0", "state": "up", "burst": ""}]
            return ExecResult(0, json.dumps({"ranks": ranks, "burst_service": self.service}), "")
        return ExecResult(0, "JOBID\tSTATE\tINFO\nƒ2\tSCHED\tneeds a burst, but the burst service is failed: x\n", "")


def test_status_shows_the_service_s_state(capsys: pytest.CaptureFixture[str]) -> None:
    from miniclusters.backends.base import ClusterStatus

    status = ClusterStatus(name="c", namespace="default", size=1, max_size=1, min_size=1, ranks_up=(0,))
    report = burst_report(_Backend({"state": "failed", "reason": "x", "pid": 9, "age": 1.0}), status)  # type: ignore[arg-type]
    assert report is not None and report["service"] is not None and report["service"]["state"] == "failed"
    print_bursts(report)
    out = capsys.readouterr().out
    assert "Burst service: failed: x" in out and "Pending ƒ2: needs a burst, but the burst service is failed: x" in out
