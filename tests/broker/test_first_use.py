"""Modules made at their service's first request (broker/modules/first_use.py, issue 45's idle broker memory): the
job manager and job exec stand in for their services until asked, hand that first request on, load at start where
a setting must be checked or state restored, and a load that fails says so at every request, never silently."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from broker.attributes import AttrError, Attributes
from broker.modules import job_tree
from broker.modules.first_use import LoadOnFirstRequest, holds_anything
from broker.modules.job_exec_entry import JOB_TMP
from broker.modules.job_exec_entry import job_exec as job_exec_entry
from broker.modules.job_manager import job_manager
from broker.protocol import ENOSYS
from broker.service import Handler, ServiceError
from broker.testing_port import FakePort, fake_request


def lead(tmp_path: Path, *settings: tuple[str, str]) -> FakePort:
    return FakePort(hosts=["node0"], rundir=str(tmp_path), attrs=Attributes(settings))


def test_the_job_manager_is_made_at_its_first_request_which_it_answers(tmp_path: Path) -> None:
    port = lead(tmp_path)
    job_manager(port)
    assert set(port.services) == {"job-manager.*"}  # nothing made yet
    assert (tmp_path / "state").is_dir() and not os.listdir(tmp_path / "state")  # made, as a start always did
    req, _replies = fake_request("job-manager.stats")
    reply = port.services["job-manager.*"](req)
    assert reply is not None and "job-manager.submit" in port.services and "job-manager.drain" in port.services
    assert (tmp_path / "state" / "journal.jsonl").exists()  # the job store is open, its epoch written
    again, _ = fake_request("job-manager.stats")
    assert port.services["job-manager.stats"](again) == reply  # later requests reach the services themselves


def test_a_topic_the_loaded_job_manager_does_not_serve_is_refused_as_the_router_refuses_it(tmp_path: Path) -> None:
    port = lead(tmp_path)
    job_manager(port)
    req, _ = fake_request("job-manager.no-such-thing")
    with pytest.raises(ServiceError) as refused:
        port.services["job-manager.*"](req)
    assert refused.value.errnum == ENOSYS and "job-manager.no-such-thing: no such service" in refused.value.message
    assert "job-manager.submit" in port.services  # that request loaded it all the same


def test_saved_state_or_a_job_manager_setting_makes_it_at_start(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "journal.jsonl").write_text("")
    restarted = lead(tmp_path)
    job_manager(restarted)
    assert "job-manager.submit" in restarted.services and "job-manager.*" not in restarted.services
    for setting in (("sched.queue-policy", "easy"), ("job-manager.fsync", "0"), ("job-exec.kill-timeout", "2s")):
        configured = lead(tmp_path / setting[0], setting)
        job_manager(configured)
        assert "job-manager.submit" in configured.services, setting


def test_a_bad_job_manager_setting_still_refuses_the_start(tmp_path: Path) -> None:
    with pytest.raises(AttrError, match=r"job-manager\.restart-policy"):
        job_manager(lead(tmp_path, ("job-manager.restart-policy", "sometimes")))


def test_a_follower_has_no_job_manager(tmp_path: Path) -> None:
    port = FakePort(hosts=["node0", "node1"], rank=1, rundir=str(tmp_path))
    job_manager(port)
    assert port.services == {}


def test_a_load_that_fails_answers_this_request_and_every_later_one_with_what_could_not_load() -> None:
    port = FakePort()
    attempts = []

    def broken() -> Mapping[str, Handler]:
        attempts.append(1)
        raise ModuleNotFoundError("No module named 'broker.modules.job_manager.manager'")

    LoadOnFirstRequest(port, "job-manager", broken)
    for _ in range(2):
        req, _replies = fake_request("job-manager.submit", {"jobspec": {}})
        with pytest.raises(ServiceError) as failed:
            port.services["job-manager.*"](req)
        assert failed.value.errnum == ENOSYS
        assert "job-manager could not be loaded" in failed.value.message
        assert "broker.modules.job_manager.manager" in failed.value.message
    assert len(attempts) == 1 and len(port.logged) == 1 and "broker.modules.job_manager.manager" in port.logged[0]


def test_job_exec_is_made_at_its_first_request_unless_a_setting_or_a_previous_broker_s_jobs_need_it(
    tmp_path: Path,
) -> None:
    assert JOB_TMP == job_tree.JOB_TMP
    port = FakePort(hosts=["node0", "node1"], rundir=str(tmp_path))
    job_exec_entry(port)
    assert set(port.services) == {"job-exec.*"}
    req, _ = fake_request("job-exec.hosts")
    assert port.services["job-exec.*"](req) == {"hosts": list(port.config.hostnames)}
    assert "job-exec.start" in port.services
    port.close_hooks[0]()  # JobExec's own close hook: it was made
    (tmp_path / JOB_TMP).mkdir(exist_ok=True)
    swept = FakePort(hosts=["node0"], rundir=str(tmp_path))
    job_exec_entry(swept)
    assert "job-exec.start" in swept.services
    no_spawn = Attributes([("job-exec.posix-spawn", "0")])
    configured = FakePort(hosts=["node0"], rundir=str(tmp_path / "x"), attrs=no_spawn)
    job_exec_entry(configured)
    assert "job-exec.start" in configured.services
    for hook in swept.close_hooks + configured.close_hooks:
        hook()


def test_a_bad_job_exec_setting_still_refuses_the_start(tmp_path: Path) -> None:
    with pytest.raises(AttrError):
        job_exec_entry(FakePort(rundir=str(tmp_path), attrs=Attributes([("job-exec.kill-timeout", "soon")])))


def test_holds_anything(tmp_path: Path) -> None:
    assert not holds_anything(str(tmp_path / "missing"))
    assert not holds_anything(str(tmp_path))
    (tmp_path / "file").write_text("")
    assert holds_anything(str(tmp_path))
    assert holds_anything(str(tmp_path / "file"))  # not a directory: the module made at start says what is wrong
