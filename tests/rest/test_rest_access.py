"""The access rule (broker/rest/access.py), token generations and the in-pod user tool, without a server."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from broker.jobs.api import JobInfo
from broker.jobs.info import job_owner
from broker.rest.access import run_as, visible
from broker.rest.settings import RestSettings
from broker.rest.tokens import decode_access_token, issue_access_token
from broker.rest.users import Principal, UserStore
from broker.rest.users_admin import AdminError, database_path

MULTI = RestSettings(state_dir=Path("/nonexistent"), mode="multi-user", token_signing_key="k" * 40)


def _job(owner: str = "", userid: int = 0) -> JobInfo:
    return JobInfo(1, "RUN", "", None, 1, 1, "", 0.0, "x", userid, 16, 16, 0.0, 0.0, 0.0, 0.0, owner=owner)


def test_a_recorded_owner_decides_and_the_superuser_sees_all() -> None:
    alice, bob, admin = Principal("alice"), Principal("bob"), Principal("admin", is_superuser=True)
    job = _job(owner="alice", userid=os.getuid())
    assert visible(alice, job, MULTI) and not visible(bob, job, MULTI) and visible(admin, job, MULTI)
    single = RestSettings(state_dir=Path("/nonexistent"), mode="single-user", token_signing_key="k" * 40)
    assert visible(bob, job, single)  # single-user mode shares everything, as documented


def test_jobs_without_an_owner_go_by_the_unix_account_above_min_uid() -> None:
    import pwd

    nobody = pwd.getpwnam("nobody")
    job = _job(userid=nobody.pw_uid)  # e.g. `flux submit` inside the pod by that account
    assert visible(Principal("nobody"), job, MULTI)
    assert not visible(Principal("no-such-account"), job, MULTI)
    root_job = _job(userid=0)
    assert not visible(Principal("root"), root_job, MULTI)  # below FLUX_MIN_UID: a tenant named root sees nothing


def test_tenants_without_an_account_run_as_the_server() -> None:
    assert run_as(Principal("tenant-with-no-account"), MULTI) == os.getuid()


def test_job_owner_reads_the_jobspec() -> None:
    assert job_owner({"attributes": {"system": {"miniclusters": {"owner": "alice"}}}}) == "alice"
    assert job_owner({"attributes": {"system": {"miniclusters": "alice"}}}) == ""
    assert job_owner({}) == ""


def test_generations_change_on_re_add_and_password_change(tmp_path: Path) -> None:
    store = UserStore(tmp_path / "users.db", rounds=4)
    store.add("ada", "pw")
    first = store.generation("ada")
    token = issue_access_token("ada", "k" * 40, 5, generation=first or "")
    assert decode_access_token(token, "k" * 40).generation == first
    store.set_password("ada", "new-pw")
    second = store.generation("ada")
    assert second != first and store.authenticate("ada", "new-pw") is not None
    store.remove("ada")
    store.add("ada", "new-pw")
    assert store.generation("ada") not in (first, second)
    store.ensure("root", "pw", superuser=True)
    kept = store.generation("root")
    store.ensure("root", "pw", superuser=True)  # a restart with the same superuser keeps its tokens valid
    assert store.generation("root") == kept


def test_a_database_from_before_generations_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "users.db"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE users (name TEXT PRIMARY KEY, hash BLOB NOT NULL, superuser INTEGER NOT NULL)")
    old.execute("INSERT INTO users VALUES ('ada', x'00', 0)")
    old.commit()
    old.close()
    generation = UserStore(path, rounds=4).generation("ada")
    assert generation  # a random one: tokens issued before the upgrade (without one) are refused


def test_the_in_pod_tool_finds_the_database_from_flux_uri(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "rundir").mkdir(parents=True)
    uri = f"local://{run / 'rundir' / 'local-0'}"
    with pytest.raises(AdminError, match="is the REST API enabled"):
        database_path(None, {"FLUX_URI": uri})
    UserStore(run / "state" / "restful" / "users.db", rounds=4).add("ada", "pw")  # where a rendered lead keeps it
    assert database_path(None, {"FLUX_URI": uri}) == (run / "state" / "restful" / "users.db", False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLUX_")} | {"FLUX_URI": uri}
    listed = subprocess.run(
        [sys.executable, "-m", "broker.rest.users_admin", "list"], env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0 and listed.stdout.split() == ["NAME", "SUPERUSER", "ada", "no"], listed.stderr
    prompt = subprocess.run(
        [sys.executable, "-m", "broker.rest.users_admin", "add", "bob"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert prompt.returncode == 2 and "--password-stdin" in prompt.stderr  # no terminal: no silent prompt


def test_the_owner_survives_save_and_restore(tmp_path: Path) -> None:
    """The owner is in the jobspec, so the queue archive carries it into the restored cluster."""
    from broker.jobs.archive import Source, read_archive, restore_into, write_archive
    from broker.jobs.build import build_jobspec
    from broker.jobs.info import job_info
    from broker.jobs.journal import JobEvent
    from broker.jobs.record import replay
    from broker.jobs.store import JobStore
    from broker.rest.jobs import system_attributes
    from broker.rest.submit import parse_submit

    request = parse_submit({"command": "sleep 5"})
    spec = build_jobspec(["sleep", "5"], system_attributes=dict(system_attributes(replace(request, owner="alice"))))
    old = JobStore(tmp_path / "old", fsync=False)
    old.restore(now_ms=1_000)
    old.append(JobEvent(21, "submit", 1.0, {"jobspec": spec, "userid": 0, "urgency": 16}))
    write_archive(old, tmp_path / "queue.tar.gz", Source("demo", ["demo-0"], 1), set())
    old.close()
    assert restore_into(tmp_path / "new", read_archive(tmp_path / "queue.tar.gz", cluster="demo"))
    restored = replay(JobStore(tmp_path / "new", fsync=False).restore(now_ms=2_000).events)[21]
    job = JobInfo.from_dict(job_info(restored, "", 1))
    assert job.owner == "alice"
    assert visible(Principal("alice"), job, MULTI) and not visible(Principal("bob"), job, MULTI)
