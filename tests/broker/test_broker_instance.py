"""Real multi-process instances over CURVE/TCP on 127.0.0.x: topology, RPC, membership, quorum, shutdown."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import tomli_w
import zmq

from broker.client import FluxError
from broker.curve_cert import generate_certificate, render_zcert
from broker.protocol import EHOSTUNREACH, ENOSYS, Message, control
from broker.testing import FLUX, Instance, addr, wait_for
from tests.waiting import holds_for

MakeInstance = Callable[..., Instance]


def flux_cli(inst: Instance, rank: int, *args: str) -> str:
    env = dict(os.environ, FLUX_URI=inst.uri(rank))
    done = subprocess.run([FLUX, *args], capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_eight_brokers_fanout_two(make_instance: MakeInstance) -> None:
    inst = make_instance(9)
    for rank in reversed(range(9)):  # start order must not matter: leaves first
        inst.start(rank, "-Stbon.fanout=2")
    inst.wait_states(dict.fromkeys(range(9), "up"), timeout=60)  # nine interpreters on two busy cores (CI: >15 s)
    expected_parents = [-1, 0, 0, 1, 1, 2, 2, 3, 3]
    with inst.handle(0) as h:
        for rank in range(9):  # an RPC reaches every rank, which reports its own parent and hostname
            info = h.rpc("broker.info", nodeid=rank)
            assert (info["rank"], info["parent"], info["hostname"]) == (rank, expected_parents[rank], f"node{rank}")
        assert h.rpc("broker.ping", nodeid=8)["route"] == [0, 1, 3, 8]
        with pytest.raises(FluxError) as unreachable:
            h.rpc("broker.ping", nodeid=42)
        assert unreachable.value.errnum == EHOSTUNREACH
        with pytest.raises(FluxError) as unknown:
            h.rpc("no.such.service", nodeid=5)
        assert unknown.value.errnum == ENOSYS
    with inst.handle(7) as h:  # leaf -> other subtree: up through the lead and down again
        assert h.rpc("broker.ping", nodeid=6)["route"] == [7, 3, 1, 0, 2, 6]
        assert h.getattr("rank") == "7" and h.getattr("size") == "9"
        assert h.rpc("overlay.status")["state"] == "run"  # lead-only service found upstream
    tree = flux_cli(inst, 4, "overlay", "status").splitlines()
    assert tree[:5] == [
        "0 node0: full",
        "├─ 1 node1: full",
        "│  ├─ 3 node3: full",
        "│  │  ├─ 7 node7: full",
        "│  │  └─ 8 node8: full",
    ]
    assert flux_cli(inst, 0, "overlay", "parentof", "8").strip() == "3"
    assert flux_cli(inst, 2, "getattr", "hostlist").strip() == "node[0-8]"
    listing = flux_cli(inst, 0, "resource", "list").splitlines()
    ncores = len(os.sched_getaffinity(0))
    assert listing[0].split() == ["STATE", "NNODES", "NCORES", "NGPUS", "NODELIST"]
    assert listing[1].split() == ["free", "9", str(9 * ncores), "0", "node[0-8]"]
    assert "run" in flux_cli(inst, 3, "uptime") and "size 9" in flux_cli(inst, 3, "uptime")
    ping = flux_cli(inst, 0, "ping", "-c", "2", "-i", "0.01", "5")
    assert ping.count("5!broker.ping") == 2 and "(0!2!5)" in ping
    with inst.handle(0) as h:
        h.rpc("broker.shutdown", nodeid=0)
    for rank, proc in inst.procs.items():
        assert proc.wait(timeout=20) == 0, (rank, proc.stderr.read() if proc.stderr else "")


@pytest.mark.serial
def test_follower_started_first_joins_fast(make_instance: MakeInstance) -> None:
    inst = make_instance(2)
    inst.start(1)
    inst.handle(1)  # follower is up and retrying its parent
    time.sleep(0.5)  # sleep: the follower retries its absent parent a while before the lead starts
    inst.start(0)
    sock = inst.rundir(0) / "local"
    wait_for(sock.exists, 15, interval=0.005)
    reachable = time.monotonic()  # the lead binds its overlay right after its local socket
    with inst.handle(0) as h:
        wait_for(lambda: h.rpc("overlay.status")["ranks"][1]["state"] == "up", 10, interval=0.005)
    joined = time.monotonic() - reachable
    print(f"joined {joined * 1000:.0f} ms after the lead became reachable")
    assert joined < 0.3


def send_unless_refused(sock: zmq.Socket[bytes], message: Message) -> None:
    """Send, or accept that the lead already dropped the connection (no pipe left to queue on)."""
    with contextlib.suppress(zmq.Again):
        sock.send(message.encode())


def test_different_key_and_plaintext_are_rejected(make_instance: MakeInstance, tmp_path: Path) -> None:
    inst = make_instance(3)
    lead = inst.start(0, "-Sbroker.quorum=1")
    inst.start(1)
    other = tmp_path / "other.cert"
    other.write_text(render_zcert(generate_certificate("intruder")))
    inst.start(2, cert=other)
    inst.wait_states({1: "up"})
    # plaintext peer: speaks ZMTP NULL to the CURVE socket; never gets a welcome
    ctx = zmq.Context()
    try:
        raw = ctx.socket(zmq.DEALER)
        raw.setsockopt(zmq.ROUTING_ID, b"2")
        raw.setsockopt(zmq.LINGER, 0)
        # a refused handshake ends the session and its pipe, after which a DEALER send would
        # block for ever; whether that happens before our send is a race, so never block
        raw.setsockopt(zmq.SNDTIMEO, 1000)
        with inst.handle(0) as h:
            endpoint = h.getattr("tbon.endpoint")
        assert endpoint.startswith(f"tcp://{addr(0)}:")
        raw.connect(endpoint)
        send_unless_refused(raw, control("overlay.hello", {"rank": 2, "size": 3, "hostname": "node2", "uuid": "x"}))
        assert raw.poll(1500) == 0
        # a peer that knows the server's public key but holds another keypair is refused by ZAP
        stranger = generate_certificate("stranger")
        ours = (inst.cert.read_text().split('public-key = "')[1])[:40].encode()
        curve = ctx.socket(zmq.DEALER)
        curve.setsockopt(zmq.LINGER, 0)
        curve.setsockopt(zmq.SNDTIMEO, 1000)
        curve.setsockopt(zmq.ROUTING_ID, b"2")
        curve.setsockopt(zmq.CURVE_SERVERKEY, ours)
        curve.setsockopt(zmq.CURVE_PUBLICKEY, stranger.public_bytes)
        curve.setsockopt(zmq.CURVE_SECRETKEY, stranger.secret_bytes)
        curve.connect(endpoint)
        send_unless_refused(curve, control("overlay.hello", {"rank": 2, "size": 3, "hostname": "node2", "uuid": "y"}))
        assert curve.poll(1500) == 0
    finally:
        ctx.destroy(0)
    assert inst.states()[2] == "down"
    inst.kill(0, 15)
    assert lead.wait(timeout=20) == 0
    assert lead.stderr is not None and "rejected CURVE peer" in lead.stderr.read()


@pytest.mark.serial
def test_lost_follower_detected_and_rejoins(make_instance: MakeInstance) -> None:
    inst = make_instance(4)
    for rank in range(4):
        inst.start(rank, "-Stbon.fanout=1")  # a chain: 0-1-2-3
    inst.wait_states(dict.fromkeys(range(4), "up"))
    with inst.handle(0) as h:
        h.subscribe("membership.")
        inst.kill(2)
        killed = time.monotonic()
        inst.wait_states({2: "lost", 3: "lost", 1: "up"}, timeout=10)
        assert time.monotonic() - killed < 1.0 + 0.4  # heartbeat.timeout=1s (+ status polling)
        lost: dict[str, str] = {}
        while "lost" not in lost.values():  # earlier (coalesced) join updates may come first
            event = h.recv_event(timeout=5)
            assert event is not None and event.topic == "membership.update"
            lost = event.payload["ranks"]
        assert lost == {"2": "lost", "3": "lost"}
    assert inst.procs[3].wait(timeout=10) == 1  # its parent vanished: no orphans
    assert "lost connection to parent" in (inst.procs[3].stderr.read() if inst.procs[3].stderr else "")
    inst.start(2, "-Stbon.fanout=1")
    inst.start(3, "-Stbon.fanout=1")
    inst.wait_states(dict.fromkeys(range(4), "up"), timeout=15)
    assert "full" in flux_cli(inst, 0, "overlay", "status").splitlines()[0]


def test_never_started_ranks_are_down_then_join(make_instance: MakeInstance, tmp_path: Path) -> None:
    inst = make_instance(4)
    marker = tmp_path / "ran"
    inst.start(
        0,
        "-Sbroker.quorum=2",
        command=[sys.executable, "-c", f"open({str(marker)!r}, 'w'); import time; time.sleep(30)"],
    )
    inst.start(1)
    wait_for(marker.exists, 20)  # online with quorum 2 of 4: the initial program runs
    assert inst.states() == {0: "up", 1: "up", 2: "down", 3: "down"}
    listing = flux_cli(inst, 0, "resource", "list")
    assert [line.split()[:2] for line in listing.splitlines()[1:]] == [["free", "2"], ["allocated", "0"], ["down", "2"]]
    assert "node[2-3]" in listing.splitlines()[3]
    assert flux_cli(inst, 0, "overlay", "status").splitlines()[0] == "0 node0: partial"
    inst.start(3)
    inst.wait_states({3: "up", 2: "down"})
    with inst.handle(0) as h:
        r = h.rpc("resource.R")
    assert [entry["rank"] for entry in r["execution"]["R_lite"]] == ["0-1,3"]
    assert r["execution"]["nodelist"] == ["node[0-1,3]"]
    with inst.handle(0) as h:
        h.rpc("broker.shutdown", nodeid=0)
    assert inst.procs[0].wait(timeout=20) == 128 + 15  # the initial program was terminated


def test_quorum_holds_the_initial_program(make_instance: MakeInstance, tmp_path: Path) -> None:
    inst = make_instance(3)
    marker = tmp_path / "ran"
    lead = inst.start(0, command=["touch", str(marker)])  # default quorum: all 3 ranks
    inst.start(1)
    inst.wait_states({1: "up"})
    holds_for("the initial program waits for the third rank", lambda: not marker.exists(), 0.3)
    with inst.handle(0) as h:
        assert h.rpc("broker.uptime")["state"] == "quorum"
    inst.start(2)
    assert lead.wait(timeout=20) == 0
    assert marker.exists()
    for rank in (1, 2):  # the lead finished: followers shut down with it
        assert inst.procs[rank].wait(timeout=20) == 0


def test_lead_crash_makes_followers_exit(make_instance: MakeInstance) -> None:
    inst = make_instance(3)
    for rank in range(3):
        inst.start(rank)
    inst.wait_states(dict.fromkeys(range(3), "up"))
    inst.kill(0)
    for rank in (1, 2):
        assert inst.procs[rank].wait(timeout=10) == 1


def test_rejoin_mode_waits_for_a_restarted_lead(make_instance: MakeInstance) -> None:
    inst = make_instance(2)
    inst.start(0)
    inst.start(1, "-Sbroker.rejoin=1")
    inst.wait_states({1: "up"})
    inst.kill(0)
    inst.procs[0].wait(timeout=10)
    # beyond the heartbeat timeout: the follower notices and keeps waiting
    holds_for("the follower waits for its lead", lambda: inst.procs[1].poll() is None, 1.5)
    inst.start(0)
    inst.wait_states({1: "up"}, timeout=15)


def test_events_reach_other_ranks(make_instance: MakeInstance) -> None:
    inst = make_instance(3)
    for rank in range(3):
        inst.start(rank, "-Stbon.fanout=1")
    inst.wait_states(dict.fromkeys(range(3), "up"))
    with inst.handle(2) as sub, inst.handle(1) as pub:
        sub.subscribe("test.")
        pub.publish("test.hello", {"n": 1})
        pub.publish("other.topic", {})
        pub.publish("test.bye", {"n": 2})
        first, second = sub.recv_event(10), sub.recv_event(10)
        assert first is not None and second is not None
        assert [(first.topic, first.payload), (second.topic, second.payload)] == [
            ("test.hello", {"n": 1}),
            ("test.bye", {"n": 2}),
        ]
        assert second.seq > first.seq > 0
        assert sub.recv_event(0.3) is None


def test_mismatched_config_is_denied(make_instance: MakeInstance) -> None:
    inst = make_instance(2)
    inst.start(0, "-Sbroker.quorum=1")
    inst.handle(0).close()
    data = tomllib.loads((inst.confdir / "bootstrap.toml").read_text())
    data["bootstrap"]["hosts"].append({"host": "node9"})  # same ranks 0-1, but the sizes disagree
    alt = inst.root / "conf-bigger"
    alt.mkdir()
    (alt / "bootstrap.toml").write_text(tomli_w.dumps(data))
    follower = subprocess.run(
        [FLUX, "broker", f"--config-path={alt}", "--hostname=node1", "-Sheartbeat.interval=0.1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert follower.returncode == 1
    assert "size mismatch: parent has 2 ranks, child has 3" in follower.stderr
    assert inst.states()[1] == "down"
