"""The API part 2 builds on: modules registering services, broker-to-broker RPCs, deferred replies, events."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import zmq

from broker.overlay import RECONNECT_IVL_MAX_MS, Overlay
from broker.testing import Instance
from tests.waiting import holds_for

MakeInstance = Callable[..., Instance]

MODULE_SCRIPT = textwrap.dedent(
    """
    import sys
    from broker.attributes import Attributes
    from broker.bootstrap import load_config
    from broker.broker import Broker, BrokerOptions, run_broker
    from broker.protocol import NODEID_ANY

    def module(broker: Broker) -> None:
        broker.register("echo.whoami", lambda req: {"rank": broker.rank, "got": req.payload})
        seen = []
        broker.subscribe("echo.", lambda msg: seen.append(msg.topic))
        broker.register("echo.seen", lambda req: {"seen": seen})
        if broker.rank != 0:
            return

        def gather(req):  # deferred reply: answer once every rank has answered us
            replies = {}
            for rank in range(broker.size):
                def done(msg, rank=rank):
                    replies[rank] = msg.payload["rank"]
                    if len(replies) == broker.size:
                        broker.publish("echo.gathered", {"n": len(replies)})
                        req.respond({"ranks": [replies[r] for r in sorted(replies)]})
                broker.rpc("echo.whoami", {"x": 1}, rank, done)
            return None

        broker.register("echo.gather", gather)

        def to_rank(req):  # relay with a timeout: errors come back as error responses, not hangs
            target = req.payload["rank"]
            reply = lambda msg: req.respond({"errnum": msg.errnum, "errstr": msg.errstr, "payload": msg.payload})
            broker.rpc(req.payload["topic"], {}, target, reply, timeout=0.3)

        broker.register("echo.relay", to_rank)
        if broker.rank == 0:
            broker.register("echo.silent", lambda req: None)  # never answers

    config = load_config(sys.argv[1])
    attrs = Attributes([("rundir", sys.argv[3]), ("heartbeat.interval", "0.1"), ("heartbeat.timeout", "1")])
    sys.exit(run_broker(BrokerOptions(config=config, attrs=attrs, hostname=sys.argv[2], modules=[module])))
    """
)


def test_module_services_rpc_and_events(make_instance: MakeInstance, tmp_path: Path) -> None:
    inst = make_instance(3)
    script = tmp_path / "module_broker.py"
    script.write_text(MODULE_SCRIPT)
    for rank in range(3):
        inst.procs[rank] = subprocess.Popen(
            [sys.executable, str(script), str(inst.confdir), inst.hosts[rank], str(inst.rundir(rank))],
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    inst.wait_states(dict.fromkeys(range(3), "up"))
    with inst.handle(2) as h:
        assert h.rpc("echo.whoami", {"a": 1}, nodeid=1) == {"rank": 1, "got": {"a": 1}}
        assert h.rpc("echo.whoami") == {"rank": 2, "got": {}}  # NODEID_ANY: served locally
        assert h.rpc("echo.gather", nodeid=0) == {"ranks": [0, 1, 2]}
        assert "echo.gathered" in h.rpc("echo.seen", nodeid=1)["seen"]  # in-broker subscribers see events
        ok = h.rpc("echo.relay", {"rank": 1, "topic": "echo.whoami"}, nodeid=0)
        assert ok["errnum"] == 0 and ok["payload"]["rank"] == 1
        silent = h.rpc("echo.relay", {"rank": 0, "topic": "echo.silent"}, nodeid=0)
        assert silent["errnum"] == errno.ETIMEDOUT and "within 0.3s" in silent["errstr"]


def test_parent_socket_honours_connect_timeout_and_bounded_reconnect() -> None:
    ctx = zmq.Context()
    try:
        overlay = Overlay(ctx, 1, None)
        overlay.connect_parent("tcp://127.0.0.1:9", connect_timeout=5.0)
        sock = overlay.parent_sock
        assert sock is not None
        assert sock.getsockopt(zmq.CONNECT_TIMEOUT) == 5000
        assert sock.getsockopt(zmq.RECONNECT_IVL_MAX) == RECONNECT_IVL_MAX_MS <= 100
        assert sock.getsockopt(zmq.ROUTING_ID) == b"1"
        overlay.close()
    finally:
        ctx.term()


def test_connect_timeout_warns_and_keeps_trying(make_instance: MakeInstance) -> None:
    inst = make_instance(2)
    follower = inst.start(1, "-Stbon.connect_timeout=0.3s")
    with inst.handle(1) as h:
        assert h.getattr("tbon.connect_timeout") == "0.3s"
        assert h.getattr("tbon.parent-endpoint").startswith("tcp://127.0.0.1:")
        # several connect timeouts without a parent: it warns and keeps trying
        holds_for("the follower keeps trying its absent parent", lambda: follower.poll() is None, 1.0)
        inst.start(0)
        inst.wait_states({1: "up"})  # still retrying: it joins as soon as the lead is there
    inst.kill(1, signal.SIGTERM)
    assert follower.wait(timeout=20) == 0
    assert follower.stderr is not None
    assert "not joined to parent rank 0 at tcp://127.0.0.1:" in follower.stderr.read()
    env = dict(os.environ, FLUX_URI=inst.uri(0))
    bad = subprocess.run(
        [sys.executable, "-m", "broker.cli.flux", "getattr", "no.such.attr"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 1 and "is not set" in bad.stderr
