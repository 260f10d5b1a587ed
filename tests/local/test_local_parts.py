"""The local backend is made of parts that each own their state (miniclusters/backends/local/core.py lists them),
composed by LocalBackend, not a stack of mixins over one `self` (the job manager's rule,
tests/broker/test_job_manager_parts.py, applied to the local backend).

Checked by reading the package's source: every `self._x` is assigned in exactly one class (the references a
part keeps to the parts it uses aside), once, in its `__init__` (the parts are wired once; a cluster's state
lives in the store, not on a part); no attribute is
public state; no part reads another object's private attributes; and a cluster record's fields are changed
only by the part that owns that concern (the actuator its size and CPU requests, the pods part its pods and
their processes, the lifecycle its deleting mark).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import miniclusters.backends.local as local
from miniclusters.backends.local.actuate import Actuator
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.backends.local.bursts import Bursts
from miniclusters.backends.local.core import LocalContext
from miniclusters.backends.local.lifecycle import Lifecycle
from miniclusters.backends.local.observe import Observer
from miniclusters.backends.local.pods import Pods
from miniclusters.backends.local.prepare import Preparer

PACKAGE = Path(local.__file__).parent
PARTS = (LocalContext, Preparer, Pods, Lifecycle, Observer, Actuator, Bursts)
MUTATORS = {"append", "extend", "add", "discard", "pop", "popitem", "clear", "update", "setdefault", "remove", "insert"}
# Which part may change each field of a stored cluster record (ClusterRecord, PodRecord in state.py); a record is
# otherwise built whole by the preparer and read by everyone.
RECORD_WRITERS = {
    ("record", "size"): "Actuator",
    ("record", "deleting"): "Lifecycle",
    ("record", "pods"): "Pods",
    ("pod", "pid"): "Pods",
    ("pod", "start_ticks"): "Pods",
    ("pod", "started_at"): "Pods",
    ("pod", "cpus"): "Pods",
    ("pod", "cpu_milli"): "Actuator",
    ("pod", "resize_desired"): "Actuator",
    ("pod", "resize_outcome"): "Actuator",
    ("pod", "resize_message"): "Actuator",
}
WIRING = {"_ctx", "_preparer", "_pods", "_bursts", "_observer"}  # a part's references to the parts it uses
FILES = ("core.py", "prepare.py", "pods.py", "lifecycle.py", "observe.py", "actuate.py", "bursts.py", "backend.py")


def _root(node: ast.expr) -> tuple[str, str] | None:
    """(root name, first attribute) of an expression like root.attr[...].more, or None if it is not one."""
    first = None
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            first = node.attr
        node = node.value
    if isinstance(node, ast.Name) and first is not None:
        return node.id, first
    return None


def _targets(node: ast.AST) -> list[ast.expr]:
    """The expressions a statement or a mutating call changes (tuples unpacked)."""
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    elif isinstance(node, ast.Delete):
        found = list(node.targets)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        found = [node.func.value]
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            found.extend(target.elts)
        else:
            flat.append(target)
    return flat


def writes(source: str) -> list[tuple[str, str, str, str, int]]:
    """(class, method, root, attribute, line) for every attribute changed inside the classes of a module."""
    found = []
    for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
        for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            for node in ast.walk(method):
                for target in _targets(node):
                    root = _root(target)
                    if root is None:
                        continue
                    if isinstance(node, ast.Call) and root[0] == "self" and root[1] in WIRING:
                        continue  # another part's method (self._pods.remove, self._ctx.store.remove): it decides
                    found.append((cls.name, method.name, *root, getattr(node, "lineno", 0)))
    return found


def ownership_problems(sources: dict[str, str]) -> list[str]:
    """What breaks 'each part owns its state, set once; records are changed by the part owning the concern'."""
    problems = []
    owners: dict[str, set[str]] = defaultdict(set)
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                problems.append(f"{module}:{node.lineno} reads {ast.unparse(node)}, another object's state")
        for cls, method, root, attr, line in writes(source):
            where = f"{module}:{line} {cls}.{method}"
            if root == "self":
                if not attr.startswith("_"):
                    problems.append(f"{where} sets public self.{attr}: a part's state is private")
                elif method != "__init__":
                    problems.append(f"{where} changes self.{attr} after wiring (a cluster's state is the store's)")
                owners[attr].add(cls)
            elif RECORD_WRITERS.get((root, attr)) != cls:
                problems.append(f"{where} changes {root}.{attr}, which {cls} does not own")
    problems += [f"self.{a} is assigned in {sorted(o)}" for a, o in owners.items() if len(o) > 1 and a not in WIRING]
    return problems


def package_sources() -> dict[str, str]:
    return {name: (PACKAGE / name).read_text() for name in FILES}


def test_each_attribute_is_assigned_in_exactly_one_part() -> None:
    sources = package_sources()
    assert ownership_problems(sources) == []
    owned: dict[str, set[str]] = defaultdict(set)
    for source in sources.values():
        for cls, _method, root, attr, _line in writes(source):
            if root == "self":
                owned[cls].add(attr)
    assert owned["LocalContext"] == {"_store", "_settings"}
    assert owned["LocalBackend"] == {"_ctx", "_observer", "_bursts", "_lifecycle", "_actuator"}
    assert owned["Lifecycle"] == {"_ctx", "_preparer", "_pods", "_bursts", "_observer"}
    assert owned["Actuator"] == {"_ctx", "_pods", "_observer"}
    for part in ("Preparer", "Pods", "Observer", "Bursts"):
        assert owned[part] == {"_ctx"}, part


def test_the_backend_composes_its_parts_instead_of_inheriting_them() -> None:
    assert LocalBackend.__bases__ == (object,)
    for part in PARTS:
        assert part.__bases__ == (object,), part
        assert part not in LocalBackend.__mro__, part
    backend_methods = {n for n, v in vars(LocalBackend).items() if callable(v) and not n.startswith("_")}
    for method in ("create", "status", "scale", "resize", "observe", "scale_to", "resize_many", "exec", "logs"):
        assert method in backend_methods, method
    for method in ("delete", "list", "lead_uri", "lead_context", "finish_teardown", "stored_spec", "kernel_weight"):
        assert method in backend_methods, method
    assert isinstance(vars(LocalBackend)["store"], property)  # read by the CLI and the multiplexing session


def test_the_check_finds_shared_state_and_foreign_writes() -> None:
    """The scan is not vacuous: state set outside __init__, set by two classes, public, read from another part,
    and a record field changed by a part that does not own it are each found."""
    bad = {
        "a.py": """
class Observer:
    def __init__(self, ctx):
        self._ctx = ctx
        self.cache = {}
    def status(self, record, pod):
        self._seen = 1
        record.size = 3
        pod.pid = None
        self._ctx.settings = None
        return self._ctx._store
""",
        "b.py": """
class Actuator:
    def __init__(self, ctx):
        self._seen = 0
        self._ctx = ctx
    def scale(self, record):
        record.size = 2
""",
    }
    problems = ownership_problems(bad)
    assert any("public self.cache" in p for p in problems), problems
    assert any("Observer.status changes self._seen after wiring" in p for p in problems), problems
    assert any("record.size, which Observer does not own" in p for p in problems), problems
    assert any("pod.pid, which Observer does not own" in p for p in problems), problems
    assert any("reads self._ctx._store" in p for p in problems), problems
    assert any("Observer.status changes self._ctx after wiring" in p for p in problems), problems
    assert any(p.startswith("self._seen is assigned in") for p in problems), problems
    assert not any(p.startswith("self._ctx is assigned in") for p in problems), problems  # wiring, not state
    assert not any("Actuator.scale" in p for p in problems), problems
    assert len(problems) == 7, problems
