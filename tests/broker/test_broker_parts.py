"""The broker's parts own their state (the job manager's rule, tests/broker/test_job_manager_parts.py, extended
to the broker): the lifecycle, the tree link, the router and the burst ranks are parts composed into the broker,
not mixins over its `self`.

Checked by reading the source: a part's state is assigned only inside it; it never assigns an attribute of the
broker it is given (it asks the broker's small methods: set_hosts, release_rank, register, publish, and the
lifecycle's set_state, set_exit_code, shutdown); its references to the broker and to other parts are set once
(in __init__, or in `attach` for the one made after it); no other broker module names the state that used to
live on the broker's `self`; and the broker.py is the one writer of the broker's own attributes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import broker
from broker.broker import Broker
from broker.burst_ranks import BurstRanks
from broker.lifecycle import Lifecycle
from broker.ownership import writes
from broker.routing import Router
from broker.tree_link import TreeLink

PACKAGE = Path(broker.__file__).parent
WIRING = {"self._b", "self._life", "self._tree"}
"""A part's references to the broker and to other parts: set once, in __init__ (or `attach`), never changed."""
PARTS = {
    "lifecycle.py": (
        Lifecycle,
        {
            "self._state",
            "self._exit_code",
            "self._rundir",
            "self._created_rundir",
            "self._close_hooks",
            "self._command",
            "self._command_fd",
            "self._shutdown_timer",
            "self._finishing",
            "self._signal_r",
            "self._signal_w",
            "self._pending_signals",
        },
    ),
    "tree_link.py": (
        TreeLink,
        {
            "self._links",
            "self._joined",
            "self._parent_last_seen",
            "self._parent_closed_at",
            "self._join_started",
            "self._join_warned",
            "self._online",
            "self._online_hooks",
            "self._membership_dirty",
            "self._membership_lost",
        },
    ),
    "burst_ranks.py": (BurstRanks, {"self._prefixes", "self._service"}),
    "routing.py": (
        Router,
        {
            "self._matchtag",
            "self._pending",
            "self._event_seq",
            "self._subscribers",
            "self._client_subs",
            "self._gone_hooks",
        },
    ),
}


def _base(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _changed(node: ast.AST) -> list[ast.expr]:
    """The expressions a statement or mutating call changes."""
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    mutators = {"append", "extend", "add", "discard", "pop", "clear", "update", "setdefault", "remove", "insert"}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in mutators:
        return [node.func.value]
    return []


def assignments(source: str) -> list[tuple[str, str]]:
    """(method, changed expression) for every change made inside the classes of `source`."""
    found = []
    for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
        for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            for node in ast.walk(method):
                for target in _changed(node):
                    if isinstance(target, (ast.Attribute, ast.Subscript)) and isinstance(_base(target), ast.Name):
                        found.append((method.name, ast.unparse(target)))
    return found


def part_problems(source: str) -> list[str]:
    """What breaks 'a part owns its state and changes the broker only through its methods'."""
    problems = []
    for method, target in assignments(source):
        if target in WIRING or target.startswith(("self._b.", "self._b[")):
            if not (method in ("__init__", "attach") and target in WIRING):
                problems.append(f"{method} changes {target}: the broker's state, not the part's")
        elif target.startswith("msg."):
            continue  # the message in flight: the router stamps its route, sender and sequence number
        elif not target.startswith("self."):
            problems.append(f"{method} changes {target}, which it does not own")
        elif not target.startswith("self._"):
            problems.append(f"{method} changes {target}: a part's state is private")
    return problems


def test_each_part_changes_the_broker_only_through_its_methods() -> None:
    for module, (_, state) in PARTS.items():
        source = (PACKAGE / module).read_text()
        assert part_problems(source) == [], module
        owned = {t.split("[")[0] for m, t in assignments(source) if t.startswith("self.") and t not in WIRING}
        configuration = {t for m, t in assignments(source) if m == "__init__" and t.startswith("self._")} - state
        assert owned - configuration == state, module


def test_the_broker_composes_its_parts_instead_of_inheriting_them() -> None:
    private = {name.removeprefix("self.") for _, state in PARTS.values() for name in state}
    for part, _ in PARTS.values():
        assert part not in Broker.__mro__ and part.__bases__ == (object,), part
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name in PARTS:
            continue
        text = path.read_text()
        for gone in ("burst_ranks[", "burst_ranks.get", ".burst_service_view(", "self.burst_service ="):
            assert gone not in text, f"{path.name} names {gone!r}, the burst part's own state"
        for gone in ("self.children", "b.children", "self.joined", "b.joined", "self.online", "b.online"):
            assert gone not in text, f"{path.name} names {gone!r}, the tree link's own state"
        names = {n.attr for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Attribute)}
        assert not names & private, f"{path.name} reaches into a part: {sorted(names & private)}"


def test_the_check_finds_a_part_that_writes_the_broker() -> None:
    """The scan is not vacuous: a write through the broker reference, and a public attribute, are found."""
    bad = """
class Part:
    def __init__(self, b):
        self._b = b
        self.ranks = {}
    def grow(self):
        self._b.size += 1
        self._b.membership.ranks.append(1)
        self._b = None
        record.state = 0
"""
    problems = part_problems(bad)
    assert len(problems) == 5, problems
    assert any("record.state, which it does not own" in p for p in problems)
    assert any("self._b.size" in p for p in problems) and any("self._b.membership.ranks" in p for p in problems)
    assert any("self.ranks" in p for p in problems) and any("grow changes self._b:" in p for p in problems)


def test_the_broker_s_own_attributes_are_written_in_broker_py_only() -> None:
    """The broker's attributes (rank, size, config, topology, sockets, ...) have one writer: broker.py. No part
    and no other module assigns them (the old BrokerCore/Broker split wrote 15 of them in two files)."""
    own = {w.attr for w in writes((PACKAGE / "broker.py").read_text(), "broker.py") if w.root == "self"}
    assert {"rank", "size", "config", "topology", "overlay", "client_sock", "resources"} <= own
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "broker.py":
            continue
        for w in writes(path.read_text(), path.name):
            if w.root != "self" and w.attr in own:
                assert w.root not in ("b", "broker", "host"), f"{path.name}:{w.line} writes {w.root}.{w.attr}"
            assert not (w.root == "self" and w.attr in ("_b",) and w.method not in ("__init__",)), w
    assert not (PACKAGE / "broker_core.py").exists()
