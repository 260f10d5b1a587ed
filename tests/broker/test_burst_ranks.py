"""The lead admits brokers past its bootstrap hosts (a burst), runs jobs on them, refuses strangers, lets them go."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import tomli_w

from broker.client import FluxError, Handle
from broker.curve_cert import generate_certificate, render_zcert
from broker.jobs.api import JobClient
from broker.protocol import EINVAL
from broker.testing import FAST, FLUX, Instance, addr, free_port, wait_for
from tests.waiting import holds_for

MakeInstance = Callable[..., Instance]


def burst_config(inst: Instance, root: Path, hosts: list[str], first: int, cert: Path | None = None) -> Path:
    """The config a burst's brokers read: the lead's hosts, then the burst's, each a child of the lead."""
    lead = tomllib.loads((inst.confdir / "bootstrap.toml").read_text())["bootstrap"]
    entries = list(lead["hosts"])
    for offset, host in enumerate(hosts):
        uri = f"tcp://{addr(first + offset)}:{free_port(addr(first + offset))}"
        entries.append({"host": host, "bind": uri, "connect": uri, "parent": inst.hosts[0]})
    confdir = root / f"conf-{hosts[0]}"
    confdir.mkdir()
    table = {"curve_cert": str(cert or inst.cert), "hosts": entries}
    (confdir / "bootstrap.toml").write_text(tomli_w.dumps({"bootstrap": table}))
    return confdir


def start_burst_broker(
    inst: Instance, confdir: Path, host: str, heartbeat: tuple[str, ...] = tuple(FAST)
) -> subprocess.Popen[str]:
    rundir = inst.root / f"run-{host}"
    args = [FLUX, "broker", f"--config-path={confdir}", f"--hostname={host}", f"-Srundir={rundir}", *heartbeat]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    inst.procs[1000 + len(inst.procs)] = proc
    return proc


def test_burst_brokers_join_as_new_ranks_run_jobs_and_leave(make_instance: MakeInstance, tmp_path: Path) -> None:
    inst = make_instance(2)
    inst.start(0)
    inst.start(1)
    inst.wait_states({0: "up", 1: "up"})
    hosts = ["burst-a-0", "burst-a-1"]
    with inst.handle(0) as h:
        with pytest.raises(FluxError) as bad:  # a prefix that names a bootstrap host could pose as a pod
            h.rpc("overlay.burst-register", {"prefix": "node", "hosts": ["node7"]}, nodeid=0)
        assert bad.value.errnum == EINVAL and "bootstrap host 'node0'" in str(bad.value)
        reply = h.rpc("overlay.burst-register", {"prefix": "burst-a-", "hosts": hosts}, nodeid=0)
        assert reply["ranks"] == [2, 3] and reply["size"] == 4
        assert reply["hostnames"] == ["node0", "node1", *hosts]
    confdir = burst_config(inst, tmp_path, hosts, first=2)
    procs = [start_burst_broker(inst, confdir, host) for host in hosts]
    inst.wait_states({2: "up", 3: "up"})
    env = dict(os.environ, FLUX_URI=inst.uri(0))
    done = subprocess.run(
        [FLUX, "run", "-N4", FLUX, "getattr", "rank"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["0", "1", "2", "3"]  # one task on each broker, bursts included
    with inst.handle(1) as h:  # a pod follower reaches a burst rank through the lead
        assert h.rpc("broker.ping", nodeid=3)["rank"] == 3
    with inst.handle(0) as h:
        assert h.getattr("size") == "4"
        released = h.rpc("overlay.burst-release", {"prefix": "burst-a-"}, nodeid=0)
        assert released == {"released": [2, 3], "size": 2}
        assert h.getattr("size") == "2"
    for proc in procs:  # the lead tells the burst's brokers to stop
        assert proc.wait(timeout=20) == 0
    assert set(inst.states()) == {0, 1}


def test_wrong_certificate_and_unregistered_burst_brokers_are_refused(
    make_instance: MakeInstance, tmp_path: Path
) -> None:
    inst = make_instance(2)
    lead = inst.start(0, "-Sbroker.quorum=1")
    inst.wait_states({0: "up"})
    with inst.handle(0) as h:
        assert h.rpc("overlay.burst-register", {"prefix": "burst-b-", "hosts": ["burst-b-0"]}, nodeid=0)["ranks"] == [2]
    stranger = tmp_path / "stranger.cert"
    stranger.write_text(render_zcert(generate_certificate("stranger")))
    wrong = start_burst_broker(inst, burst_config(inst, tmp_path, ["burst-b-0"], first=2, cert=stranger), "burst-b-0")
    # a burst broker whose host the lead never registered is denied at hello and exits
    unknown = start_burst_broker(inst, burst_config(inst, tmp_path, ["burst-c-0"], first=3), "burst-c-0")
    assert unknown.wait(timeout=20) == 1
    assert unknown.stderr is not None and "refused us: rank 2 should be 'burst-b-0'" in unknown.stderr.read()
    wait_for((inst.root / "run-burst-b-0" / "local").exists)  # the wrong-key broker is up and knocking
    # the wrong-key broker never completes the CURVE handshake, and keeps knocking
    holds_for(
        "the wrong-key broker knocks on, never up", lambda: wrong.poll() is None and inst.states()[2] == "down", 1.5
    )
    with Handle(f"local://{inst.root / 'run-burst-b-0'}/local") as h:
        assert h.rpc("broker.info", nodeid=2)["joined"] is False
    wrong.kill()
    inst.kill(0, 15)
    assert lead.wait(timeout=20) == 0


def _with_burst(
    inst: Instance, root: Path, heartbeat: tuple[str, ...] = tuple(FAST)
) -> tuple[Path, subprocess.Popen[str]]:
    """A 2-pod instance and one burst broker joined as rank 2, all on `heartbeat`'s settings."""
    inst.start(0, "-Sresource.cores=0-1", heartbeat=heartbeat)
    inst.start(1, "-Sresource.cores=0-1", heartbeat=heartbeat)
    inst.wait_states({0: "up", 1: "up"})
    with inst.handle(0) as h:
        assert h.rpc("overlay.burst-register", {"prefix": "burst-a-", "hosts": ["burst-a-0"]}, nodeid=0)["ranks"] == [2]
    confdir = burst_config(inst, root, ["burst-a-0"], first=2)
    proc = start_burst_broker(inst, confdir, "burst-a-0", heartbeat)
    inst.wait_states({2: "up"})
    return confdir, proc


def _stop(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


# Heartbeats far slower than the tests: a dead broker's closed connection is seen at the lead's heartbeats 5-10 s
# after it died, and silence after 2 minutes, so a rank is seen lost only by what the tests are about.
SLOW_LOSS = ("-Sheartbeat.interval=5", "-Sheartbeat.timeout=120")


def test_a_burst_broker_that_dies_and_restarts_fails_its_jobs_as_a_lost_rank(
    make_instance: MakeInstance, tmp_path: Path
) -> None:
    inst = make_instance(2)
    confdir, proc = _with_burst(inst, tmp_path, heartbeat=SLOW_LOSS)
    with JobClient(inst.uri(0)) as client:
        job = client.submit(command=["sleep", "60"], nnodes=3, ntasks=3)
        client.wait_state(job, "RUN")
        _stop(proc)  # kill -9, then at once a new broker for the same rank (as the burst pod's restart does)
        start_burst_broker(inst, confdir, "burst-a-0")
        info = client.wait(job, timeout=30)
        assert info.result == "FAILED" and info.exception_type == "node-failure", info
        assert "lost contact with broker rank 2 (burst-a-0)" in info.exception_note
        inst.wait_states({2: "up"})  # the new broker is the rank now, and runs work
        again = client.submit(command=["true"], nnodes=3, ntasks=3)
        assert client.wait(again, timeout=30).success


def test_cancel_and_kill_end_a_job_whose_burst_broker_is_gone(make_instance: MakeInstance, tmp_path: Path) -> None:
    inst = make_instance(2)
    _confdir, proc = _with_burst(inst, tmp_path, heartbeat=SLOW_LOSS)
    with JobClient(inst.uri(0)) as client:
        canceled = client.submit(command=["sleep", "60"], nnodes=3, ntasks=3)
        killed = client.submit(command=["sleep", "60"], nnodes=3, ntasks=3)
        client.wait_state(canceled, "RUN")
        client.wait_state(killed, "RUN")
        _stop(proc)  # its broker is gone; the lead has not timed it out yet
        client.cancel(canceled)
        client.kill(killed, signal.SIGKILL)
        assert client.wait(canceled, timeout=20).result == "CANCELED"
        info = client.wait(killed, timeout=20)
        assert info.state == "INACTIVE" and not info.success
        assert inst.states()[2] == "up"  # ended by cancel and kill themselves, not by a heartbeat timeout


def test_a_signal_lost_with_its_broker_is_sent_again(make_instance: MakeInstance, tmp_path: Path) -> None:
    """The cancel's signal reaches a broker that never answers and then dies with it (here: stopped, then killed;
    in CI: killed a moment before, its connection not yet seen closed). Asked again, the rank is known gone and
    the job ends, long before the heartbeat would time the rank out."""
    inst = make_instance(2)
    _confdir, proc = _with_burst(inst, tmp_path, heartbeat=SLOW_LOSS)
    with JobClient(inst.uri(0)) as client:
        job = client.submit(command=["sleep", "60"], nnodes=3, ntasks=3)
        client.wait_state(job, "RUN")
        os.killpg(proc.pid, signal.SIGSTOP)  # still connected; answers nothing
        client.cancel(job)
        time.sleep(0.5)  # sleep: the lead sends the signal into the stopped broker's connection: nothing to observe
        _stop(proc)
        assert client.wait(job, timeout=20).result == "CANCELED"
        assert inst.states()[2] == "up"  # not by a heartbeat timeout


def test_a_restarted_pod_follower_rejoins_while_a_burst_is_attached(
    make_instance: MakeInstance, tmp_path: Path
) -> None:
    inst = make_instance(2)
    _with_burst(inst, tmp_path)
    with inst.handle(0) as h:
        assert h.getattr("size") == "3"
    inst.kill(1)
    inst.procs[1].wait(timeout=10)
    inst.wait_states({1: "lost"})
    follower = inst.start(1, "-Sresource.cores=0-1")  # its config knows the 2 pods only, never the burst
    inst.wait_states({1: "up", 2: "up"}, timeout=20)
    with inst.handle(1) as h:
        assert h.rpc("broker.info", nodeid=1)["joined"] is True
    assert follower.poll() is None
    with JobClient(inst.uri(0)) as client:
        info = client.wait(client.submit(command=["true"], nnodes=3, ntasks=3), timeout=30)
        assert info.success, info.exception_note
