"""Pure pieces: topology, idsets, attributes, quorum/membership, protocol, services, CLI option parsing."""

from __future__ import annotations

import itertools
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.attributes import AttrError, Attributes, parse_duration, parse_setattr
from broker.cli.resource_render import render_overlay, resource_rows
from broker.cli.start import UsageError, parse_broker, parse_start
from broker.membership import DOWN, LOST, UP, Membership, Quorum, QuorumError
from broker.payloads import OverlayRank, OverlayStatus, RankEntry, ResourceStatus
from broker.protocol import EINVAL, Message, ProtocolError, request
from broker.service import Request, ServiceError, ServiceRegistry
from broker.topology import TopologyError, build, custom, kary
from common import idset


def test_kary_fanout_2() -> None:
    topo = kary(8, 2)
    assert list(topo.parents) == [-1, 0, 0, 1, 1, 2, 2, 3]
    assert topo.children(1) == [3, 4]
    assert topo.descendants(1) == [3, 4, 7]
    assert topo.depth(7) == 3
    assert topo.next_hop(0, 7) == 1
    assert topo.next_hop(7, 5) == 3
    assert topo.path(7, 5) == [7, 3, 1, 0, 2, 5]


def test_flat_and_default() -> None:
    assert list(kary(4, 0).parents) == [-1, 0, 0, 0]
    assert build(40, None, None, {}).parent(33) == 1  # kary:32 default
    assert build(5, "kary:2", None, {}).parent(4) == 1
    assert build(5, None, 3, {}).parent(4) == 1
    assert build(5, "custom", None, {}).parent(4) == 0


def test_custom_parents_and_errors() -> None:
    topo = custom(4, {1: 0, 2: 1, 3: 2})
    assert topo.path(3, 0) == [3, 2, 1, 0]
    with pytest.raises(TopologyError, match="cycle"):
        custom(3, {1: 2, 2: 1})
    with pytest.raises(TopologyError, match="rank 0"):
        custom(3, {0: 1})
    with pytest.raises(TopologyError, match="unsupported"):
        build(3, "binomial", None, {})
    with pytest.raises(TopologyError, match="parent keys"):
        build(3, "kary:2", None, {1: 0})


@given(st.integers(min_value=1, max_value=80), st.integers(min_value=0, max_value=6))
def test_routes_reach_every_rank(size: int, fanout: int) -> None:
    topo = kary(size, fanout)
    for target in range(size):
        path = topo.path(size - 1, target)
        assert path[-1] == target
        assert all(topo.parent(a) == b or topo.parent(b) == a for a, b in itertools.pairwise(path))


@given(st.sets(st.integers(min_value=0, max_value=300)))
def test_idset_roundtrip(ids: set[int]) -> None:
    assert idset.decode(idset.encode(ids)) == sorted(ids)


def test_idset_format() -> None:
    assert idset.encode([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert idset.decode("[0-2,5]") == [0, 1, 2, 5]
    with pytest.raises(idset.IdsetError):
        idset.decode("3-1")


def test_attributes_and_durations() -> None:
    assert parse_duration("5s") == 5 and parse_duration("100ms") == 0.1 and parse_duration("1.5m") == 90
    assert parse_duration("2") == 2 and parse_duration("1h") == 3600
    with pytest.raises(AttrError):
        parse_duration("soon")
    assert parse_setattr("tbon.fanout=2") == ("tbon.fanout", "2")
    with pytest.raises(AttrError):
        parse_setattr("nofanout")
    attrs = Attributes([("tbon.connect_timeout", "5s"), ("tbon.fanout", "x"), ("broker.rejoin", "yes")])
    assert attrs.duration("tbon.connect_timeout", 30) == 5
    assert attrs.duration("missing", 30) == 30
    assert attrs.boolean("broker.rejoin", False) is True
    with pytest.raises(AttrError, match=r"tbon\.fanout"):
        attrs.integer("tbon.fanout", None)


def test_quorum_and_membership() -> None:
    members = Membership(["a", "b", "c", "d"])
    members.set(0, UP)
    assert not Quorum.parse(None, 4).reached(members)
    members.set(1, UP)
    assert Quorum.parse("2", 4).reached(members)
    assert not Quorum.parse("0,2", 4).reached(members)
    assert Quorum.parse("0-1", 4).reached(members)
    with pytest.raises(QuorumError):
        Quorum.parse("5", 4)
    with pytest.raises(QuorumError):
        Quorum.parse("zero", 4)
    topo = kary(4, 1)  # a chain 0-1-2-3
    assert members.subtree_status(topo, 0) == "partial"
    assert members.subtree_status(topo, 2) == "offline"
    members.set(2, LOST)
    assert members.subtree_status(topo, 0) == "degraded"
    assert members.subtree_status(topo, 2) == "lost"
    # partial entries and an unknown rank, as a child's JSON may say: merge checks each (so the cast)
    update = cast(
        dict[str, RankEntry], {"3": {"state": UP, "resources": {"ncores": 2}, "uuid": "u"}, "9": {"state": UP}}
    )
    changed = members.merge(update)
    assert changed == [3] and members.ranks[3].resources == {"ncores": 2}
    assert members.in_state(DOWN) == []


def test_message_roundtrip_and_rejects_garbage() -> None:
    msg = request("job-manager.submit", {"a": 1}, nodeid=3, matchtag=9)
    msg.route = ["c:ab", "r:1"]
    back = Message.decode(msg.encode())
    assert back == msg
    err = Message.decode(back.error(EINVAL, "bad").encode())
    assert (err.type, err.errnum, err.errstr, err.route, err.matchtag) == ("rsp", EINVAL, "bad", ["c:ab", "r:1"], 9)
    for junk in (b"\xff", b"[]", b'{"t":"zz","topic":"x"}', b'{"t":"req","topic":"x","p":[]}'):
        with pytest.raises(ProtocolError):
            Message.decode(junk)


def test_service_registry_dispatch() -> None:
    sent: list[Message] = []
    reg = ServiceRegistry()
    reg.register("job-manager.*", lambda req: {"service": req.topic})
    reg.register("job-manager.submit", lambda req: {"id": req.get("n", int) * 2})
    reg.register("bad", lambda req: 1 / 0)  # type: ignore[arg-type,return-value]

    def call(topic: str, payload: dict[str, object]) -> Message:
        handler = reg.lookup(topic)
        assert handler is not None
        reg.dispatch(handler, Request(request(topic, payload), sent.append))
        return sent[-1]

    assert call("job-manager.submit", {"n": 4}).payload == {"id": 8}
    assert call("job-manager.list", {}).payload == {"service": "job-manager.list"}
    assert call("job-manager.submit", {"n": "x"}).errnum == EINVAL
    assert "internal error" in call("bad", {}).errstr
    assert reg.lookup("other.x") is None
    with pytest.raises(ValueError):
        reg.register("bad", lambda req: None)
    with pytest.raises(ServiceError):
        Request(request("t"), sent.append).get("missing", str)


def test_start_option_parsing() -> None:
    args = parse_start(["-o", "--config", "/etc/flux/config", "-Sbroker.quorum=2", "sleep", "5"])
    assert (args.config_path, args.attrs, args.command) == (
        "/etc/flux/config",
        [("broker.quorum", "2")],
        ["sleep", "5"],
    )
    args = parse_start(["-o", "--config-path=/c,-Stbon.fanout=2", "--test-size=3", "--", "true"])
    assert (args.config_path, args.attrs, args.test_size, args.command) == ("/c", [("tbon.fanout", "2")], 3, ["true"])
    args = parse_broker(["--config-path=/d", "-S", "hostname=x", "--hostname", "y"])
    assert (args.config_path, args.attrs, args.hostname, args.command) == ("/d", [("hostname", "x")], "y", [])
    with pytest.raises(UsageError):
        parse_start(["--bogus"])
    with pytest.raises(UsageError):
        parse_start(["-o", "--config-path=/x,stray"])
    with pytest.raises(UsageError):
        parse_start(["--test-size=zero"])


def test_cli_renderers() -> None:
    def rank(number: int, parent: int, status: str) -> OverlayRank:
        state = "lost" if status == "lost" else "online"
        return {"rank": number, "hostname": f"h{number}", "state": state, "status": status, "parent": parent,
                "since": 0.0, "burst": ""}  # fmt: skip

    status = cast(
        OverlayStatus,
        {  # the keys the tree reads (no burst service)
            "size": 4,
            "topology": "custom",
            "parents": [-1, 0, 0, 1],
            "state": "degraded",
            "ranks": [rank(0, -1, "degraded"), rank(1, 0, "lost"), rank(2, 0, "full"), rank(3, 1, "lost")],
        },
    )
    assert render_overlay(status) == ["0 h0: degraded", "├─ 1 h1: lost", "│  └─ 3 h3: lost", "└─ 2 h2: full"]
    rows = resource_rows(
        cast(
            ResourceStatus,
            {  # the keys the rows read (no R)
                "up": "0,2",
                "down": "1",
                "hostnames": ["h0", "h1", "h2"],
                "reports": {"0": {"ncores": 2}, "1": {"ncores": 4}, "2": {"ncores": 2}},
            },
        )
    )
    assert rows == [("free", 2, 4, 0, "h[0,2]"), ("allocated", 0, 0, 0, ""), ("down", 1, 4, 0, "h1")]
    # ranks that never reported (not started, or scaled away) are down with their cores, as Flux lists them
    never = resource_rows(
        cast(
            ResourceStatus,
            {  # the keys the rows read (no R)
                "up": "0-1",
                "down": "2-3",
                "hostnames": ["h0", "h1", "h2", "h3"],
                "reports": {"0": {"ncores": 2}, "1": {"ncores": 2}},
            },
        )
    )
    assert never[2] == ("down", 2, 4, 0, "h[2-3]")
