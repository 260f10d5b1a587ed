"""The local backend is made of parts that each own their state (miniclusters/backends/local/core.py lists them),
composed by LocalBackend, not a stack of mixins over one `self` (the job manager's rule,
tests/broker/test_job_manager_parts.py, applied to the local backend).

Checked by reading the package's source (broker/ownership.py): every `self._x` is assigned in exactly one class
(the references a part keeps to the parts it uses aside), once, in its `__init__` (the parts are wired once; a
cluster's state lives in the store, not on a part); no attribute is public state; no part reads another
object's private attributes; and a cluster record's fields are changed only by the part that owns that concern
(the actuator its size and CPU requests, the pods part its pods and their processes, the lifecycle its deleting
mark).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import miniclusters.backends.local as local
from broker.ownership import Write, foreign_private_reads, writes
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


def part_writes(source: str, module: str) -> list[Write]:
    """The writes of a module's classes, but for calls of another part's methods (self._pods.remove(...),
    self._ctx.store.remove(...)): that part decides what they change."""
    return [w for w in writes(source, module) if not (w.by_call and w.root == "self" and w.attr in WIRING)]


def ownership_problems(sources: dict[str, str]) -> list[str]:
    """What breaks 'each part owns its state, set once; records are changed by the part owning the concern'."""
    problems = []
    owners: dict[str, set[str]] = defaultdict(set)
    for module, source in sources.items():
        problems += [f"{module}: {where} reads another object's state" for where in foreign_private_reads(source)]
        for w in part_writes(source, module):
            where = f"{module}:{w.line} {w.cls}.{w.method}"
            if w.root == "self":
                if not w.attr.startswith("_"):
                    problems.append(f"{where} sets public self.{w.attr}: a part's state is private")
                elif w.method != "__init__":
                    problems.append(f"{where} changes self.{w.attr} after wiring (a cluster's state is the store's)")
                owners[w.attr].add(w.cls)
            elif RECORD_WRITERS.get((w.root, w.attr)) != w.cls:
                problems.append(f"{where} changes {w.root}.{w.attr}, which {w.cls} does not own")
    problems += [f"self.{a} is assigned in {sorted(o)}" for a, o in owners.items() if len(o) > 1 and a not in WIRING]
    return problems


def package_sources() -> dict[str, str]:
    return {name: (PACKAGE / name).read_text() for name in FILES}


def test_each_attribute_is_assigned_in_exactly_one_part() -> None:
    sources = package_sources()
    assert ownership_problems(sources) == []
    owned: dict[str, set[str]] = defaultdict(set)
    for module, source in sources.items():
        for w in part_writes(source, module):
            if w.root == "self":
                owned[w.cls].add(w.attr)
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
    assert any("self._ctx._store reads another object" in p for p in problems), problems
    assert any("Observer.status changes self._ctx after wiring" in p for p in problems), problems
    assert any(p.startswith("self._seen is assigned in") for p in problems), problems
    assert not any(p.startswith("self._ctx is assigned in") for p in problems), problems  # wiring, not state
    assert not any("Actuator.scale" in p for p in problems), problems
    assert len(problems) == 7, problems
