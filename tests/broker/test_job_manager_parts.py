"""The job manager is made of parts that each own their state (broker/modules/job_manager/__init__.py).

Checked by reading the package's source: every attribute of job state is assigned (set, augmented, deleted,
item-assigned or changed in place by a mutating call) in exactly one part, through `self`; no part reaches into
another's private attributes; objects other than `self` are changed only where their dataclass is defined; and
job records are created and changed only by the job table.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import broker.modules.job_manager as job_manager
from broker.ownership import foreign_private_reads, writes

PACKAGE = Path(job_manager.__file__).parent
WIRING = {"_jm", "_b"}  # each part's references to the job manager and the broker: set once, never changed
COMPOSER = "JobManager"  # holds the parts, set once in __init__


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
        for w in writes(source, module):
            where = f"{w.module}:{w.line} {w.cls}.{w.method}"
            if w.root != "self":
                if w.attr not in local_fields:
                    problems.append(f"{where} changes {w.root}.{w.attr}, which it does not own")
            elif w.cls == COMPOSER or w.attr in WIRING:
                if w.method != "__init__":
                    problems.append(f"{where} changes self.{w.attr} (set once in __init__)")
            elif not w.attr.startswith("_"):
                problems.append(f"{where} sets public self.{w.attr}: a part's state is private")
            else:
                owners[w.attr].add(f"{w.module}:{w.cls}")
    problems += [f"self.{a} is assigned in {sorted(o)}" for a, o in owners.items() if len(o) > 1]
    return problems


def package_sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(PACKAGE.glob("*.py"))}


def test_each_attribute_of_job_state_is_assigned_in_exactly_one_part() -> None:
    sources = package_sources()
    assert ownership_problems(sources) == []
    owners: dict[str, set[str]] = defaultdict(set)
    for module, source in sources.items():
        for w in writes(source, module):
            if w.root == "self" and w.attr not in WIRING and w.cls != COMPOSER:
                owners[w.cls].add(w.attr)
    # The parts the issue names, each with the state it owns.
    assert {"_jobs", "_eventlogs", "_buffer", "_store"} <= owners["JobTable"]
    assert {"_pending", "_order", "_started", "_enabled"} <= owners["JobQueue"]
    assert {"_execs", "_output", "_output_files"} <= owners["Executions"]
    assert {"_waiters", "_output_watches", "_eventlog_watches", "_annotation_waits", "_idle_waits"} <= owners["Watches"]
    assert {"_saving", "_checkpointing", "_unfit"} <= owners["Saver"]
    assert "Queries" not in owners  # reads only


def test_job_records_are_created_and_changed_only_by_the_table() -> None:
    for module, source in package_sources().items():
        calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
        names = {ast.unparse(c.func).split(".")[-1] for c in calls}
        if module != "table.py":
            assert not names & {"apply", "JobRecord", "replay"}, module


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
        self._jm.table._jobs[1] = None
        self._jm = None
"""
    foreign = """
class D:
    def f(self, record):
        record.state = 0
        self.jobs, self._n = {}, 1
"""
    problems = ownership_problems({"a.py": second_writer, "c.py": reach, "d.py": foreign})
    assert any("self._jobs is assigned in ['a.py:A', 'a.py:B']" in p for p in problems), problems
    assert any("self._jm.table._jobs" in p for p in problems), problems
    assert any("changes self._jm" in p for p in problems), problems
    assert any("changes record.state" in p for p in problems), problems
    assert any("public self.jobs" in p for p in problems), problems
    assert len(problems) == 6  # the reach at line 4 is both a private read and a change of self._jm
