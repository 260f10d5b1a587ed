"""Multi-user mode: each user sees and cancels only their own jobs, and jobs run as that user's account."""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Iterator

import pytest

from broker.jobs.shapes import JobListRecord as JobRecord
from broker.rest.client import RestClient, RestError
from broker.rest.testing import SUPERUSER, Server, start_server
from broker.rest.users import UserStore
from tests.waiting import wait_until

ACCOUNTS = {"mc-rest-alice": "alice-pw", "mc-rest-bob": "bob-pw"}


@pytest.fixture(scope="module")
def accounts() -> Iterator[dict[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("creating system accounts and running jobs as them needs root (CI runs as root)")
    created = []
    for name in ACCOUNTS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
            created.append(name)
    try:
        yield ACCOUNTS
    finally:
        for name in created:
            subprocess.run(["userdel", name], check=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, accounts: dict[str, str]) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("rest-multi")
    store = UserStore(tmp / "state" / "restful" / "users.db", rounds=4)
    for name, password in accounts.items():
        store.add(name, password)
    store.close()
    os.chmod(tmp, 0o755)  # the users' jobs start in the broker's working directory
    yield from start_server(tmp, size=1, FLUX_SERVER_MODE="multi-user")


def _client(server: Server, name: str) -> RestClient:
    password = ACCOUNTS.get(name) or SUPERUSER[1]
    return RestClient(server.url, user=name, token=password, secret_key="")


def _finished(client: RestClient, jobid: int) -> JobRecord:
    def ended() -> JobRecord | None:
        job = client.job(jobid)
        return job if job["state"] == "INACTIVE" else None

    return wait_until(f"job {jobid} ends", ended, timeout=30, interval=0.1, detail=lambda: client.job(jobid))


def test_jobs_run_as_the_submitting_user(server: Server) -> None:
    alice = _client(server, "mc-rest-alice")
    jobid = alice.submit("id -un", workdir="/")
    job = _finished(alice, jobid)
    assert job["result"] == "COMPLETED", alice.output(jobid)
    assert alice.output(jobid) == ["mc-rest-alice\n"]
    assert job["userid"] == pwd.getpwnam("mc-rest-alice").pw_uid


def test_users_see_and_cancel_only_their_own_jobs(server: Server) -> None:
    alice, bob = _client(server, "mc-rest-alice"), _client(server, "mc-rest-bob")
    admin = _client(server, SUPERUSER[0])
    jobid = alice.submit("sleep 30", workdir="/")
    assert jobid in [j["id"] for j in alice.jobs()]
    assert jobid not in [j["id"] for j in bob.jobs()]
    # another user's job is not even acknowledged to exist: each answer is the one for an unknown id
    for action, status in ((lambda: bob.job(jobid), 404), (lambda: bob.cancel(jobid), 400)):
        with pytest.raises(RestError) as caught:
            action()
        assert caught.value.status == status and "no job" in caught.value.message
    assert bob.output(jobid) == []  # 200 with a Message, as for an unknown id
    assert jobid in [j["id"] for j in admin.jobs()]  # the superuser sees everyone's
    alice.cancel(jobid)
    assert _finished(alice, jobid)["result"] == "CANCELED"


def test_only_the_superuser_may_stop_the_service(server: Server) -> None:
    with pytest.raises(RestError) as caught:
        _client(server, "mc-rest-bob").stop_service()
    assert caught.value.status == 403
    assert server.process.poll() is None


def test_unknown_users_cannot_log_in(server: Server) -> None:
    with pytest.raises(RestError) as caught:
        RestClient(server.url, user="mallory", token="guess", secret_key="").jobs()
    assert caught.value.status == 400 and "incorrect user or password" in caught.value.message  # refused, once


def test_the_superuser_stops_the_instance(server: Server) -> None:
    """Last in this module: it ends the instance the other tests use."""
    assert "stopping" in _client(server, SUPERUSER[0]).stop_service().lower()
    server.process.wait(timeout=60)  # the whole instance (brokers and REST server) shut down
    assert server.process.returncode is not None
