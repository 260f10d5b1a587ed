"""Real local clusters as root: network namespaces, hostnames, host entries, cgroups, the brokers' tree; resize in
place, a crashed pod, elastic scaling while a job runs, bad input, Ctrl-C, and nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from miniclusters.api.spec import DEFAULT_BROKER_PORT
from miniclusters.backends.local import cgroups, latency, netns, process
from miniclusters.backends.local.backend import LocalBackend
from tests.waiting import wait_until

pytestmark = pytest.mark.needs_root


def _status(mc, name: str) -> dict:
    result = mc("status", name, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _job(mc: Any, name: str, jobid: str) -> tuple[str, str]:
    """(state, nodelist) of one job from `flux jobs -a` in the lead pod."""
    for line in mc("exec", name, "--", "flux", "jobs", "-a").stdout.splitlines():
        words = line.split()
        if words and words[0] == jobid:
            return words[3], words[-1]
    return "", ""


def _pids(backend: LocalBackend, name: str) -> dict[int, int | None]:
    return {i: p.pid for i, p in backend.store.load(name).pods.items()}


def test_pods_are_isolated_join_the_lead_and_resize_in_place(
    mc, machine: Any, backend: LocalBackend, spec_writer: Any, waiter: Any
) -> None:
    spec = spec_writer(machine.state_dir, "iso", size=3, max_size=4, cpu="500m")
    up = mc("up", str(spec), "--detach")
    assert up.returncode == 0, up.stderr
    assert "brokers joined 3/3" in up.stderr

    # own hostname, own address on eth0, every pod name resolves (also pods not started yet)
    seen = {}
    for index in range(3):
        run = mc("exec", "iso", "-i", str(index), "--", "sh", "-c", "hostname; ip -4 -o addr show dev eth0")
        assert run.returncode == 0, run.stderr
        hostname, address_line = run.stdout.splitlines()
        assert hostname == f"iso-{index}"
        seen[hostname] = address_line.split()[3].split("/")[0]
    assert len(set(seen.values())) == 3
    hosts = mc("exec", "iso", "-i", "2", "--", "getent", "hosts", "iso-0", "iso-1", "iso-3")
    assert hosts.returncode == 0
    resolved = dict(line.split()[::-1] for line in hosts.stdout.splitlines())
    assert resolved["iso-0"] == seen["iso-0"] and resolved["iso-1"] == seen["iso-1"] and "iso-3" in resolved
    assert {f"mc-iso-{i}" for i in range(3)} <= netns.list_namespaces()

    # the brokers formed one instance rooted at pod 0
    status = _status(mc, "iso")
    assert status["ranks_up"] == [0, 1, 2] and status["ranks_down"] == [3]
    resources = mc("exec", "iso", "--", "flux", "resource", "list")
    assert "iso-[0-2]" in resources.stdout and "iso-3" in resources.stdout

    # each pod in its own cgroup, weighted as the kubelet would (500m -> 512 shares / non-linear weight)
    driver = cgroups.detect()
    assert driver is not None
    record = backend.store.load("iso")
    for index, pod in record.pods.items():
        assert pod.pid in driver.pids("iso", index)
        assert driver.read_weight("iso", index) == driver.weight_for(500)
    assert [p["cpu_desired"] for p in status["pods"]] == ["500m"] * 3
    assert [p["cpu_actual"] for p in status["pods"]] == ["500m"] * 3

    # resize in place: new weight in the cgroup, same processes
    before = _pids(backend, "iso")
    broker_pids = set(driver.pids("iso", 1))
    resize = mc("resize", "iso", "1", "--cpu", "250m")
    assert resize.returncode == 0 and "done" in resize.stdout, resize.stdout + resize.stderr
    assert driver.read_weight("iso", 1) == driver.weight_for(250)
    assert _pids(backend, "iso") == before and broker_pids <= set(driver.pids("iso", 1))
    pod1 = _status(mc, "iso")["pods"][1]
    assert pod1["cpu_desired"] == "250m" and pod1["cpu_actual"] == "250m" and pod1["phase"] == "Running"
    assert driver.read_weight("iso", 0) == driver.weight_for(500)  # the others untouched

    # a crashed pod shows as failed; the rest keeps working
    crashed = before[2]
    assert crashed is not None
    os.killpg(crashed, signal.SIGKILL)
    failed = waiter(lambda: _status(mc, "iso")["pods"][2]["phase"] == "Failed", timeout=10)
    assert failed
    status = _status(mc, "iso")
    assert [p["phase"] for p in status["pods"]] == ["Running", "Running", "Failed"]
    assert any(c["type"] == "Degraded" and "iso-2" in c["message"] for c in status["conditions"])
    still = mc("exec", "iso", "-i", "1", "--", "flux", "getattr", "size")
    assert still.returncode == 0 and still.stdout.strip() == "4"
    assert mc("exec", "iso", "--", "flux", "resource", "list").returncode == 0
    assert "iso" in mc("list").stdout

    down = mc("down", "iso")
    assert down.returncode == 0, down.stderr
    assert not any(n.startswith("mc-iso-") for n in netns.list_namespaces())
    assert not driver.cluster_dir("iso").exists()
    assert not process.tagged(f"{machine.state_dir}/", prefix=True)


def test_scale_up_and_down_while_a_job_runs(
    mc, machine: Any, backend: LocalBackend, spec_writer: Any, waiter: Any
) -> None:
    spec = spec_writer(machine.state_dir, "ela", size=2, max_size=4, min_size=1)
    assert mc("up", str(spec), "--detach").returncode == 0
    release = machine.state_dir / "release-ela"  # the job runs until the test says so: no race with a slow machine
    wait = f"while [ ! -e {release} ]; do sleep 0.2; done"
    submit = mc("exec", "ela", "--", "flux", "submit", "-N", "1", "sh", "-c", wait)
    assert submit.returncode == 0, submit.stderr
    jobid = submit.stdout.strip().splitlines()[-1]
    assert waiter(lambda: _job(mc, "ela", jobid)[0] == "R", timeout=10)
    assert _job(mc, "ela", jobid)[1] == "ela-0", "the scheduler placed the 1-node job off the lead"
    lead_pid = _pids(backend, "ela")[0]

    grow = mc("scale", "ela", "4")
    assert grow.returncode == 0, grow.stderr
    assert waiter(lambda: _status(mc, "ela")["ranks_up"] == [0, 1, 2, 3], timeout=20)
    assert mc("exec", "ela", "-i", "3", "--", "hostname").stdout.strip() == "ela-3"

    # refused, and nothing changed
    for size in ("5", "0"):
        refused = mc("scale", "ela", size)
        assert refused.returncode == 2 and "allowed range is [1, 4]" in refused.stderr
    assert _status(mc, "ela")["size"] == 4

    shrink = mc("scale", "ela", "1")
    assert shrink.returncode == 0, shrink.stderr
    status = _status(mc, "ela")
    assert [p["index"] for p in status["pods"]] == [0] and _pids(backend, "ela")[0] == lead_pid
    assert not any(n.startswith("mc-ela-") and not n.endswith("-0") for n in netns.list_namespaces())
    assert _job(mc, "ela", jobid)[0] == "R"  # the lead alone still runs it
    assert mc("scale", "ela", "3").returncode == 0
    assert waiter(lambda: (_status(mc, "ela")["ranks_up"] or [])[:3] == [0, 1, 2], timeout=20)

    assert _job(mc, "ela", jobid)[0] == "R"
    release.touch()
    assert waiter(lambda: _job(mc, "ela", jobid)[0] == "CD", timeout=25)  # completed, not failed or lost
    assert mc("down", "ela").returncode == 0


def test_bad_input_changes_nothing(mc, machine: Any, backend: LocalBackend, spec_writer: Any) -> None:
    spec = spec_writer(machine.state_dir, "bad", size=2, max_size=3, min_size=2)
    assert mc("up", str(spec), "--detach").returncode == 0
    before = _pids(backend, "bad")
    shares_before = cgroups.detect().read_weight("bad", 1)  # type: ignore[union-attr]

    again = mc("up", str(spec), "--detach")  # the same spec: says how to reach it, changes nothing
    assert again.returncode == 0 and "already up" in again.stdout and "minicluster down bad" in again.stdout
    low = mc("scale", "bad", "1")
    assert low.returncode == 2 and "below spec.minSize=2" in low.stderr
    high = mc("scale", "bad", "4")
    assert high.returncode == 2 and "above spec.maxSize=3" in high.stderr
    missing = mc("resize", "bad", "7", "--cpu", "1")
    assert missing.returncode == 2 and "has no pod with index 7 (pod indexes present: 0, 1" in missing.stderr
    cpu = mc("resize", "bad", "1", "--cpu", "lots")
    assert cpu.returncode == 2 and "--cpu: 'lots' is not a Kubernetes quantity" in cpu.stderr
    namespace = mc("status", "bad", "-n", "hpc")
    assert namespace.returncode == 2 and "--namespace" in namespace.stderr
    unknown = mc("down", "nosuch")
    assert unknown.returncode == 1 and "MiniCluster 'nosuch' not found" in unknown.stderr

    assert _pids(backend, "bad") == before
    assert cgroups.detect().read_weight("bad", 1) == shares_before  # type: ignore[union-attr]
    assert _status(mc, "bad")["size"] == 2
    assert mc("down", "bad").returncode == 0


CONNECT_TIME = """
import socket, sys, time
best = 1e9
for _ in range(5):
    started = time.perf_counter()
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    best = min(best, time.perf_counter() - started)
print(best)
"""


def _connect_seconds(mc: Any, name: str, index: int, host: str) -> float:
    """The fastest of five TCP handshakes from pod `index` to the lead's broker port: one round trip each."""
    run = mc("exec", name, "-i", str(index), "--", "python3", "-c", CONNECT_TIME, host, str(DEFAULT_BROKER_PORT))
    assert run.returncode == 0, run.stderr
    return float(run.stdout.strip())


@pytest.mark.serial  # measures milliseconds of delay: alone on the machine
def test_latency_delays_every_packet_between_pods(mc, machine: Any, spec_writer: Any) -> None:
    """netem where the kernel has it, else the NFQUEUE delay line: a handshake pays the delay once each way."""
    spec = spec_writer(machine.state_dir, "lat", size=2)
    method, _why = latency.choose_method()
    up = mc("up", str(spec), "--detach", "--latency", "5ms")
    if method is None:  # neither netem nor iptables + libnetfilter_queue (make setup installs the latter)
        assert up.returncode == 2 and "--latency 5ms: no way to delay packets on this machine" in up.stderr
        assert mc("status", "lat").returncode == 1  # nothing was created
        return
    assert up.returncode == 0, up.stderr
    condition = next(c for c in _status(mc, "lat")["conditions"] if c["type"] == "NetworkEmulation")
    assert condition["reason"] == method and "5ms per packet each way" in condition["message"]
    both = _connect_seconds(mc, "lat", 1, "lat-0")
    assert both >= 0.010  # 5 ms out + 5 ms back
    if method == "nfqueue":
        assert "netem is unavailable" in up.stderr and "using the NFQUEUE delay line" in up.stderr
        lines = latency.delay_line_pids("mc-lat-1")
        assert len(lines) == 1
        os.kill(lines[0], signal.SIGKILL)  # fail-open: without its delay line pod 1 still talks, undelayed
        wait_until("the killed delay line is gone", lambda: lines[0] not in latency.delay_line_pids("mc-lat-1"))
        # only pod 0's answer is delayed now: at least its 5 ms, and clearly less than both ways (the fastest of
        # five handshakes still carries a few ms of this machine's load, so no fixed bound under 10 ms holds)
        one_way = _connect_seconds(mc, "lat", 1, "lat-0")
        assert 0.005 <= one_way < min(0.0099, both - 0.0025)
        assert len(latency.delay_line_pids("mc-lat-0")) == 1
    else:
        qdisc = subprocess.run(["tc", "-n", "mc-lat-1", "qdisc", "show", "dev", "eth0"], capture_output=True, text=True)
        assert "netem" in qdisc.stdout and "delay 5" in qdisc.stdout
    assert mc("down", "lat").returncode == 0
    assert not [n for n in netns.list_namespaces() if n.startswith("mc-lat-")]  # no delay line kept one alive


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("fast", "expected a duration like 2ms"),
        ("0ms", "expected a delay above 0 and at most 10s"),
        ("20s", "expected a delay above 0"),
    ],
)
def test_bad_latency_value_is_refused(mc, machine: Any, spec_writer: Any, value: str, message: str) -> None:
    spec = spec_writer(machine.state_dir, "latv", size=1, max_size=1, min_size=0)
    result = mc("up", str(spec), "--latency", value)
    assert result.returncode == 2 and f"--latency {value!r}: {message}" in result.stderr
    assert mc("status", "latv").returncode == 1  # nothing was created


def test_ctrl_c_during_up_tears_everything_down(
    machine: Any, spec_writer: Any, waiter: Any, minicluster_bin: Any
) -> None:
    # launcher: the lead runs the command directly under `flux start`, so this needs no job manager
    spec = spec_writer(machine.state_dir, "intr", size=3, interactive=False, command="sleep 60", launcher=True)
    up = subprocess.Popen(
        [minicluster_bin, "up", str(spec)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        store_state = Path(machine.state_dir) / "intr" / "state.json"
        assert waiter(lambda: store_state.exists(), timeout=20)
        machine.remember()
        assert waiter(lambda: len(netns.list_namespaces() & {f"mc-intr-{i}" for i in range(3)}) == 3, timeout=20), (
            "pods never started"
        )
        time.sleep(1.0)  # sleep: `up` goes on from starting the pods to waiting for the lead's command
        up.send_signal(signal.SIGINT)
        _, stderr = up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert up.returncode == 130, stderr
    assert "tearing down MiniCluster intr" in stderr
    assert not store_state.exists()
    assert machine.leftovers() == []


def test_ctrl_c_while_waiting_for_the_brokers(
    machine: Any, spec_writer: Any, waiter: Any, minicluster_bin: Any
) -> None:
    spec = spec_writer(machine.state_dir, "early", size=2)
    up = subprocess.Popen([minicluster_bin, "up", str(spec), "--detach"], stderr=subprocess.PIPE, text=True)
    try:
        assert waiter(lambda: (Path(machine.state_dir) / "early" / "state.json").exists(), timeout=20, interval=0.02)
        machine.remember()
        up.send_signal(signal.SIGINT)
        _, stderr = up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert up.returncode in (0, 130), stderr  # 0 only if it was already up and detached before the signal
    if up.returncode == 130:
        assert not (Path(machine.state_dir) / "early").exists()
        assert machine.leftovers() == []


def test_spec_command_runs_through_the_lead_and_sets_the_exit_code(mc, machine: Any, spec_writer: Any) -> None:
    ok = spec_writer(machine.state_dir, "cmd", size=2, tasks=2, interactive=False, command="hostname")
    result = mc("up", str(ok))
    assert result.returncode == 0, result.stderr
    assert {"cmd-0", "cmd-1"} <= set(result.stdout.split())
    assert not (Path(machine.state_dir) / "cmd").exists()  # torn down after the lead finished

    failing = spec_writer(machine.state_dir, "fail", size=2, interactive=False, command="sh -c 'exit 3'")
    result = mc("up", str(failing))
    assert result.returncode == 3, result.stdout + result.stderr
    assert not (Path(machine.state_dir) / "fail").exists()


@pytest.mark.parametrize("index", [1])
def test_logs_of_a_pod(mc, machine: Any, index: int, spec_writer: Any) -> None:
    spec = spec_writer(machine.state_dir, "logs", size=2)
    assert mc("up", str(spec), "--detach").returncode == 0
    result = mc("logs", "logs", str(index))
    assert result.returncode == 0 and f"[logs-{index}] follower broker starting" in result.stdout
    assert mc("logs", "logs", "5").returncode == 2
    assert mc("down", "logs").returncode == 0
