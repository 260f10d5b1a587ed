"""The flux flavour's lead-restart rc1 task, run against a stand-in for flux-core's Python API (the local flux
flavour test runs it in real flux-core: tests/local/test_local_flux_flavour.py)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from broker.jobs.jobid import encode_f58, encode_jobid
from miniclusters.render.lead_restart import EXCEPTION_TYPE, NOTE, RC1_TASK, TASK_FILE

RUN, SCHED = 16, 8


class _Future:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


class FakeHandle:
    """Answers job-manager.list and kvs.lookup as a restarted flux-core lead would; records raises."""

    def __init__(self, jobs: list[dict[str, int]], guests: dict[int, Any]) -> None:
        self.jobs, self.guests, self.raised = jobs, guests, []  # type: ignore[var-annotated]

    def rpc(self, topic: str, payload: dict[str, Any]) -> _Future:
        if topic == "job-manager.list":
            return _Future({"jobs": self.jobs})
        if topic == "kvs.lookup":
            jobid = next(j["id"] for j in self.jobs if payload["key"] == encode_jobid(j["id"], "kvs") + ".guest")
            return _Future(self.guests[jobid])
        assert topic == "job-manager.raise"
        self.raised.append(payload)
        return _Future({})


@pytest.fixture
def rc1(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """The task file executed as flux-modprobe would load it, with flux.job.JobID and flux.modprobe.task faked."""

    class JobID(int):
        kvs = property(lambda self: encode_jobid(int(self), "kvs"))
        f58 = property(lambda self: encode_f58(int(self)))

    def task(name: str, **options: Any) -> Any:
        def register(func: Any) -> Any:
            func.task = (name, options)
            return func

        return register

    flux = types.ModuleType("flux")
    job = types.ModuleType("flux.job")
    modprobe = types.ModuleType("flux.modprobe")
    job.JobID = JobID  # type: ignore[attr-defined]
    modprobe.task = task  # type: ignore[attr-defined]
    for name, module in (("flux", flux), ("flux.job", job), ("flux.modprobe", modprobe)):
        monkeypatch.setitem(sys.modules, name, module)
    namespace: dict[str, Any] = {}
    exec(compile(RC1_TASK, TASK_FILE, "exec"), namespace)
    return types.SimpleNamespace(**namespace)


def test_only_running_jobs_that_cannot_be_reattached_get_the_note(rc1: Any, capsys: pytest.CaptureFixture[str]) -> None:
    lost, grafted, vanished, queued = 101 << 24, 102 << 24, 103 << 24, 104 << 24
    handle = FakeHandle(
        [{"id": lost, "state": RUN}, {"id": grafted, "state": RUN}, {"id": vanished, "state": RUN},
         {"id": queued, "state": SCHED}],
        {lost: {"val": {"ver": 1, "type": "symlink"}}, grafted: {"val": {"ver": 1, "type": "dirref"}},
         vanished: FileNotFoundError(2, "No such file or directory")},
    )  # fmt: skip
    rc1.lead_restart_note(types.SimpleNamespace(handle=handle))
    assert handle.raised == [
        {"id": job, "severity": 0, "type": EXCEPTION_TYPE, "note": NOTE} for job in (lost, vanished)
    ]  # a job whose namespace was grafted at a clean shutdown is left for job-exec to reattach
    assert encode_f58(lost) in capsys.readouterr().err  # said in the broker's log too


def test_it_runs_on_the_lead_between_job_manager_and_job_exec(rc1: Any) -> None:
    _name, options = rc1.lead_restart_note.task
    assert options["ranks"] == "0" and options["before"] == ["job-exec"] and options["after"] == ["job-manager"]


def test_a_failure_never_stops_the_broker_from_starting(rc1: Any, capsys: pytest.CaptureFixture[str]) -> None:
    class Broken:
        def rpc(self, topic: str, payload: dict[str, Any]) -> _Future:
            return _Future(OSError(38, "Function not implemented"))

    rc1.lead_restart_note(types.SimpleNamespace(handle=Broken()))  # no exception escapes into flux-modprobe
    assert "lead-restart note not raised" in capsys.readouterr().err
