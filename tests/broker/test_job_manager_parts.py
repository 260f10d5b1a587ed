"""The job manager is made of parts that each own their state (broker/modules/job_manager/__init__.py).

Checked by reading the package's source: every attribute of job state is assigned (set, augmented, deleted,
item-assigned or changed in place by a mutating call, DrainTable's `apply` included) in exactly one part, through
`self`; no part reaches into another's private attributes; objects other than `self` are changed only where their
dataclass is defined; a part's references to the port and to its collaborators are set once (in __init__, or in
`wire` for the parts made after it); and job records are created and changed only by the job table.

Outside the package, the scan reads every module of the broker (broker/*.py and broker/modules/**, classes and
module-level functions alike, as the old queue_state.py's handler closures were): none changes job-manager state,
that is an attribute reached through a job-manager part or through the queue's scheduler (its drains).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import broker
import broker.modules.job_manager as job_manager
from broker.ownership import MUTATORS, Write, foreign_private_reads, writes

PACKAGE = Path(job_manager.__file__).parent
BROKER = Path(broker.__file__).parent
JOB_MUTATORS = MUTATORS | {"apply"}  # DrainTable.apply changes the drains the queue's scheduler holds
WIRING = {
    "_port",
    "_cluster",
    "_online",
    "_on_commit",
    "_on_online",
    "_hostnames",
    "_burst_view",
    "_table",
    "_queue",
    "_executions",
    "_watches",
    "_saver",
    "_warmer",
    "_parts",
}
"""Each part's references to the broker's port, to callbacks and to its collaborators: set once, never changed."""
WIRING_METHODS = {"__init__", "wire"}
COMPOSER = "JobManager"  # holds the parts, set once in __init__
PARTS = {"jm", "job_manager", "table", "queue", "executions", "watches", "saver", "queries", "warmer", "sched"}
"""Names under which code outside the package would hold a job-manager part (or the queue's scheduler)."""


def dataclass_fields(source: str) -> set[str]:
    fields = set()
    for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
        if any("dataclass" in ast.unparse(d) for d in cls.decorator_list):
            fields |= {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return fields


def ownership_problems(sources: dict[str, str]) -> list[str]:
    """What breaks 'one owner per piece of job state' in these modules (empty when it holds)."""
    problems = []
    owners: dict[str, set[str]] = defaultdict(set)
    for module, source in sources.items():
        local_fields = dataclass_fields(source)
        problems += [f"{module}: {where}" for where in foreign_private_reads(source)]
        for w in writes(source, module, JOB_MUTATORS, functions=True):
            where = f"{w.module}:{w.line} {w.cls}.{w.method}"
            if w.root != "self":
                if w.attr not in local_fields:
                    problems.append(f"{where} changes {w.root}.{w.attr}, which it does not own")
            elif w.cls == COMPOSER or w.attr in WIRING:
                if w.method not in WIRING_METHODS:
                    problems.append(f"{where} changes self.{w.attr} (set once in __init__ or wire)")
            elif not w.attr.startswith("_"):
                problems.append(f"{where} sets public self.{w.attr}: a part's state is private")
            else:
                owners[w.attr].add(f"{w.module}:{w.cls}")
    problems += [f"self.{a} is assigned in {sorted(o)}" for a, o in owners.items() if len(o) > 1]
    return problems


def package_sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(PACKAGE.glob("*.py"))}


def outside_sources() -> dict[str, str]:
    """Every broker module outside the package that could change job-manager state (REST, jobs and the CLI talk
    to the job manager only by RPC)."""
    paths = [*BROKER.glob("*.py"), *(BROKER / "modules").rglob("*.py")]
    return {str(p.relative_to(BROKER)): p.read_text() for p in sorted(paths) if PACKAGE not in p.parents}


def outside_writes(sources: dict[str, str]) -> list[str]:
    """Writes outside the package that reach job-manager state: through a part, or a part's private state."""
    state = {w.attr for src in package_sources().values() for w in writes(src, "", JOB_MUTATORS) if w.root == "self"}
    found: list[Write] = []
    for module, source in sources.items():
        found += [
            w
            for w in writes(source, module, JOB_MUTATORS, functions=True)
            if w.root in PARTS or w.attr in PARTS or (w.root != "self" and w.attr in state)
        ]
    return [f"{w.module}:{w.line} {w.cls}.{w.method} changes {w.root}.{w.attr}" for w in found]


def test_each_attribute_of_job_state_is_assigned_in_exactly_one_part() -> None:
    sources = package_sources()
    assert ownership_problems(sources) == []
    owners: dict[str, set[str]] = defaultdict(set)
    for module, source in sources.items():
        for w in writes(source, module):
            if w.root == "self" and w.attr not in WIRING and w.cls != COMPOSER and not w.attr.startswith("_parts"):
                owners[w.cls].add(w.attr)
    # The parts the issue names, each with the state it owns.
    assert {"_jobs", "_eventlogs", "_buffer", "_store"} <= owners["JobTable"]
    assert {"_pending", "_order", "_started", "_enabled"} <= owners["JobQueue"]
    assert {"_execs", "_outputs"} <= owners["Executions"]
    assert {"_lines", "_files"} <= owners["JobOutputs"]
    assert {"_waiters", "_output_watches", "_eventlog_watches", "_annotation_waits", "_idle_waits"} <= owners["Watches"]
    assert {"_saving", "_checkpointing", "_unfit"} <= owners["Saver"]
    assert "Queries" not in owners  # reads only


def test_job_records_are_created_and_changed_only_by_the_table() -> None:
    for module, source in package_sources().items():
        calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
        names = {ast.unparse(c.func) for c in calls if not ast.unparse(c.func).endswith("drains.apply")}
        if module != "table.py":
            assert not {n.split(".")[-1] for n in names} & {"apply", "JobRecord", "replay"}, module


def test_nothing_outside_the_package_changes_job_manager_state() -> None:
    """The drains were changed by broker/modules/queue_state.py, outside the package and outside this scan; the
    queue-state service is now a part (queue_state.py) and the drains change through JobQueue.drain."""
    assert not (BROKER / "modules" / "queue_state.py").exists()
    assert outside_writes(outside_sources()) == []


def test_the_outside_scan_finds_a_writer_of_job_state() -> None:
    """Not vacuous: the old queue_state.py's closure, a method changing a part's state, a private attribute."""
    closure = """
def register(jm):
    queue = jm.queue
    def drain(req):
        queue.sched.drains.apply("exact", [1], "", 0.0)
    return drain
"""
    method = """
class Autoscaler:
    def forget(self, jm):
        jm.table.post(1)
        self.jm.executions.by_id.clear()
    def poke(self, parts):
        parts.queue._pending.add(1)
"""
    problems = outside_writes({"a.py": closure, "b.py": method})
    assert any("a.py:5 <module>.register changes queue.sched" in p for p in problems), problems
    assert any("changes self.jm" in p for p in problems), problems
    assert any("changes parts.queue" in p for p in problems), problems
    assert len(problems) == 3, problems


def test_the_check_finds_shared_and_reached_into_state() -> None:
    """The scan is not vacuous: a second writer, a reach into another part, and a public attribute are found."""
    second_writer = """
class A:
    def __init__(self, jm):
        self._jm = jm
        self._jobs = {}
class B:
    def forget(self, jobid):
        self._jobs.pop(jobid)
"""
    reach = """
class C:
    def run(self):
        self._port.table._jobs[1] = None
        self._port = None
"""
    foreign = """
class D:
    def f(self, record):
        record.state = 0
        self.jobs, self._n = {}, 1
"""
    problems = ownership_problems({"a.py": second_writer, "c.py": reach, "d.py": foreign})
    assert any("self._jobs is assigned in ['a.py:A', 'a.py:B']" in p for p in problems), problems
    assert any("self._port.table._jobs" in p for p in problems), problems
    assert any("changes self._port" in p for p in problems), problems
    assert any("changes record.state" in p for p in problems), problems
    assert any("public self.jobs" in p for p in problems), problems
    assert len(problems) == 6  # the reach at line 4 is both a private read and a change of self._jm
