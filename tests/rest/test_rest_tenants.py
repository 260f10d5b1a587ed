"""Tenants: users without Unix accounts on the lead, managed through /v1/users and `minicluster users`, each seeing
only their own jobs (another's answered exactly like a job that does not exist), tokens revoked on removal."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from broker.jobs.shapes import JobListRecord as JobRecord
from broker.rest.client import RestClient, RestError
from broker.rest.testing import SECRET_KEY, SUPERUSER, Server, start_server
from tests.waiting import wait_until

MINICLUSTER = str(Path(sys.executable).with_name("minicluster"))
TIMEOUT = 60.0  # seconds: the machine is shared and often loaded
PASSWORDS = {"alice": "alice-Pa55word-for-tests", "bob": "bob-Pa55word-for-tests", "carol": "carol-Pa55-w0rd"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("rest-tenants")
    yield from start_server(tmp, size=1, FLUX_SERVER_MODE="multi-user")


def _as(server: Server, name: str) -> RestClient:
    password = PASSWORDS.get(name) or SUPERUSER[1]
    return RestClient(server.url, user=name, token=password, secret_key="")


def _admin(server: Server) -> RestClient:
    return _as(server, SUPERUSER[0])


def _users_cli(
    server: Server, *args: str, stdin: str = "", caller: tuple[str, str] = SUPERUSER
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLUX_", "MINICLUSTER_"))}
    env.update(MINICLUSTER_URL=server.url, FLUX_USER=caller[0], FLUX_TOKEN=caller[1])
    return subprocess.run(
        [MINICLUSTER, "users", *args], input=stdin, env=env, capture_output=True, text=True, timeout=60
    )


def _ensure_user(server: Server, name: str) -> None:
    names = [u["name"] for u in _admin(server).users()["users"]]
    if name not in names:
        _admin(server).add_user(name, PASSWORDS[name])


def _wait_inactive(client: RestClient, jobid: int) -> JobRecord:
    def ended() -> JobRecord | None:
        job = client.job(jobid)
        return job if job["state"] == "INACTIVE" else None

    return wait_until(f"job {jobid} ends", ended, timeout=90, interval=0.1, detail=lambda: client.job(jobid))


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_cli_added_user_sees_only_her_own_jobs_and_the_superuser_sees_hers(server: Server) -> None:
    admin = _admin(server)
    admins_job = admin.submit("echo from the superuser")
    added = _users_cli(server, "add", "alice", "--password-stdin", stdin=PASSWORDS["alice"] + "\n")
    assert added.returncode == 0, added.stderr
    assert "added user alice" in added.stdout
    assert PASSWORDS["alice"] not in added.stdout + added.stderr  # never echoed

    alice = _as(server, "alice")
    assert admins_job not in [j["id"] for j in alice.jobs()]  # none of the superuser's jobs
    assert alice.jobs() == []
    hers = alice.submit("echo from alice")
    assert _wait_inactive(alice, hers)["result"] == "COMPLETED"
    assert [j["id"] for j in alice.jobs()] == [hers]
    assert alice.output(hers) == ["from alice\n"]
    assert {hers, admins_job} <= {j["id"] for j in admin.jobs()}  # the superuser sees both
    assert admin.output(hers) == ["from alice\n"]

    listed = _users_cli(server, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    answer = json.loads(listed.stdout)
    assert {"name": "alice", "superuser": False} in answer["users"] and answer["mode"] == "multi-user"
    table = _users_cli(server, "list")
    assert table.stdout.splitlines()[0].split() == ["NAME", "SUPERUSER"]
    assert ["alice", "no"] in [line.split() for line in table.stdout.splitlines()]
    assert [SUPERUSER[0], "yes"] in [line.split() for line in table.stdout.splitlines()]
    assert "hash" not in listed.stdout and PASSWORDS["alice"] not in listed.stdout
    assert PASSWORDS["alice"] not in (server.statedir.parent / "instance.log").read_text()  # never logged


def test_two_users_cannot_read_or_cancel_each_others_jobs(server: Server) -> None:
    for name in ("alice", "bob"):
        _ensure_user(server, name)
    alice, bob, admin = _as(server, "alice"), _as(server, "bob"), _admin(server)
    hers = alice.submit("sleep 60")
    his = bob.submit("sleep 60")
    missing = 987654321  # never issued here
    assert hers not in [j["id"] for j in bob.jobs()] and his not in [j["id"] for j in alice.jobs()]
    assert {hers, his} <= {j["id"] for j in admin.jobs()}

    bob_token, alice_token = bob.login(), alice.login()
    for token, other in ((bob_token, hers), (alice_token, his)):
        for method, path in (
            ("GET", "/v1/jobs/{}"),
            ("GET", "/v1/jobs/{}/output/stream"),
            ("GET", "/v1/jobs/{}/output"),
            ("POST", "/v1/jobs/{}/cancel"),
        ):
            theirs = httpx.request(method, server.url + path.format(other), headers=_bearer(token), timeout=TIMEOUT)
            absent = httpx.request(method, server.url + path.format(missing), headers=_bearer(token), timeout=TIMEOUT)
            # the same status and the same body (with the id as given) as for a job that does not exist
            assert theirs.status_code == absent.status_code and theirs.status_code in (200, 400, 404), path
            assert theirs.text.replace(str(other), "ID") == absent.text.replace(str(missing), "ID"), path
        search = httpx.get(
            f"{server.url}/v1/jobs/search", params={"query": str(other)}, headers=_bearer(token), timeout=TIMEOUT
        )
        assert search.json()["recordsTotal"] >= 1 and search.json()["data"] == []  # own jobs only, never theirs

    # neither cancel reached the other's job; each may cancel their own, the superuser anyone's
    assert alice.job(hers)["state"] != "INACTIVE" and bob.job(his)["state"] != "INACTIVE"
    alice.cancel(hers)
    admin.cancel(his)
    assert _wait_inactive(alice, hers)["result"] == "CANCELED"
    assert _wait_inactive(bob, his)["result"] == "CANCELED"


def test_the_public_client_as_a_tenant_sees_only_its_own_jobs(server: Server) -> None:
    """flux-restful-client (PyPI) logging in as a tenant: its own submissions only."""
    _ensure_user(server, "bob")
    admins_job = _admin(server).submit("true")
    program = textwrap.dedent(
        f"""
        import json
        from flux_restful_client.main.client import FluxRestfulClient
        cli = FluxRestfulClient(host={server.url!r}, user="bob", token={PASSWORDS["bob"]!r},
                                secret_key={SECRET_KEY!r}, attempts=0)
        mine = cli.submit("echo public client")["id"]
        print(json.dumps({{"mine": mine, "listed": [j["id"] for j in cli.jobs()["jobs"]],
                           "theirs": cli.jobs({admins_job}), "missing": cli.jobs(987654321)}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["mine"] in seen["listed"] and admins_job not in seen["listed"]
    assert seen["theirs"] is None and seen["missing"] is None  # the client's answer for a job that is not there
    assert seen["mine"] in [j["id"] for j in _admin(server).jobs()]


def test_removal_revokes_tokens_already_issued_and_re_adding_does_not_revive_them(server: Server) -> None:
    admin = _admin(server)
    admin.add_user("carol", PASSWORDS["carol"])
    old = _as(server, "carol").login()
    assert httpx.get(f"{server.url}/v1/jobs", headers=_bearer(old), timeout=TIMEOUT).status_code == 200

    removed = _users_cli(server, "remove", "carol")
    assert removed.returncode == 0 and "removed user carol" in removed.stdout, removed.stderr
    refused = httpx.get(f"{server.url}/v1/jobs", headers=_bearer(old), timeout=TIMEOUT)
    assert refused.status_code == 401 and "www-authenticate" in refused.headers
    with pytest.raises(RestError) as caught:
        _as(server, "carol").jobs()  # nor can she log in again
    assert caught.value.status == 400

    admin.add_user("carol", PASSWORDS["carol"])  # the same name and password again
    again = httpx.get(f"{server.url}/v1/jobs", headers=_bearer(old), timeout=TIMEOUT)
    assert again.status_code == 401 and "revoked" in again.json()["detail"]
    assert _as(server, "carol").jobs() == []  # a fresh login works


def test_bad_user_requests_name_the_field_and_change_nothing(server: Server) -> None:
    _ensure_user(server, "alice")
    before = _admin(server).users()
    token = _admin(server).login()
    cases = {
        "name: must not be empty": {"name": "", "password": "x"},
        "name 'a b'": {"name": "a b", "password": "x"},
        "name '../etc'": {"name": "../etc", "password": "x"},
        "name: is required": {"password": "x"},
        "password: is required": {"name": "dave"},
        "password: must not be empty": {"name": "dave", "password": ""},
        "password: longer than 72 bytes": {"name": "dave", "password": "p" * 73},
        "superuser: must be true or false": {"name": "dave", "password": "x", "superuser": "yes"},
        "role: unknown field": {"name": "dave", "password": "x", "role": "admin"},
    }
    for expected, body in cases.items():
        reply = httpx.post(f"{server.url}/v1/users", json=body, headers=_bearer(token), timeout=TIMEOUT)
        assert reply.status_code == 400, (body, reply.text)
        assert any(expected in line for line in reply.json()["Errors"]), (expected, reply.json())
        assert "p" * 73 not in reply.text
    exists = httpx.post(
        f"{server.url}/v1/users", json={"name": "alice", "password": "x"}, headers=_bearer(token), timeout=TIMEOUT
    )
    assert exists.status_code == 409 and "already exists" in exists.json()["detail"]
    unknown = httpx.delete(f"{server.url}/v1/users/nobody-here", headers=_bearer(token), timeout=TIMEOUT)
    assert unknown.status_code == 404 and "no user 'nobody-here'" in unknown.json()["detail"]
    myself = httpx.delete(f"{server.url}/v1/users/{SUPERUSER[0]}", headers=_bearer(token), timeout=TIMEOUT)
    assert myself.status_code == 409
    assert _admin(server).users() == before  # nothing changed

    # a non-superuser may do none of it
    alice = _as(server, "alice").login()
    forbidden: tuple[tuple[str, str, dict[str, str] | None], ...] = (
        ("POST", "/v1/users", {"name": "eve", "password": "x"}),
        ("GET", "/v1/users", None),
        ("DELETE", f"/v1/users/{SUPERUSER[0]}", None),
    )
    for method, path, sent in forbidden:
        reply = httpx.request(method, server.url + path, json=sent, headers=_bearer(alice), timeout=TIMEOUT)
        assert reply.status_code == 403 and "only a superuser" in reply.json()["detail"]
    assert _admin(server).users() == before

    # the CLI: exit 2 and the field for invalid input, non-zero for an unknown user or a non-superuser caller
    bad = _users_cli(server, "add", "a b", "--password-stdin", stdin="pw\n")
    assert bad.returncode == 2 and "NAME" in bad.stderr
    empty = _users_cli(server, "add", "dave", "--password-stdin", stdin="\n")
    assert empty.returncode == 2 and "--password-stdin" in empty.stderr and "empty" in empty.stderr
    dup = _users_cli(server, "add", "alice", "--password-stdin", stdin="pw\n")
    assert dup.returncode == 2 and "already exists" in dup.stderr
    gone = _users_cli(server, "remove", "nobody-here")
    assert gone.returncode == 1 and "no user 'nobody-here'" in gone.stderr
    denied = _users_cli(server, "list", caller=("alice", PASSWORDS["alice"]))
    assert denied.returncode == 2 and "only a superuser" in denied.stderr and "403" in denied.stderr
    no_tty = _users_cli(server, "add", "dave")  # stdin is not a terminal: no prompt, a pointer to the flag
    assert no_tty.returncode == 2 and "--password-stdin" in no_tty.stderr
    assert _admin(server).users() == before


def _talk(fd: int, script: list[tuple[bytes, bytes]], deadline: float) -> bytes:
    """Answer each expected prompt on a pty; everything the program wrote to its terminal, until it exits."""
    seen = b""
    steps = list(script)
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the program exited and closed the terminal
            return seen
        if not chunk:
            return seen
        seen += chunk
        if steps and steps[0][0] in seen.rsplit(b"\n", 1)[-1]:
            os.write(fd, steps.pop(0)[1])
    raise AssertionError(f"no answer in time; the terminal showed {seen!r}")


def test_the_password_prompt_asks_twice_and_never_echoes(server: Server) -> None:
    password = "dave-Pa55word-typed-on-a-terminal"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLUX_", "MINICLUSTER_"))}
    env.update(MINICLUSTER_URL=server.url, FLUX_USER=SUPERUSER[0], FLUX_TOKEN=SUPERUSER[1])
    pid, fd = pty.fork()
    if pid == 0:  # the child: `minicluster users add dave` on a terminal of its own
        os.execve(MINICLUSTER, [MINICLUSTER, "users", "add", "dave"], env)
    try:
        typed = password.encode() + b"\n"
        shown = _talk(fd, [(b"Password for dave", typed), (b"Repeat for confirmation", typed)], time.monotonic() + 60)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, shown
    assert b"added user dave" in shown and password.encode() not in shown  # the terminal never echoed it
    assert RestClient(server.url, user="dave", token=password, secret_key="").jobs() == []  # the password set


def test_the_openapi_document_describes_the_user_endpoints(server: Server) -> None:
    paths = httpx.get(f"{server.url}/openapi.json", timeout=TIMEOUT).json()["paths"]
    assert set(paths["/v1/users"]["post"]["responses"]) == {"201", "400", "401", "403", "409"}
    assert set(paths["/v1/users"]["get"]["responses"]) == {"200", "401", "403"}
    assert {"200", "400", "401", "403", "404", "409"} <= set(paths["/v1/users/{name}"]["delete"]["responses"])
    assert {"200", "400", "401", "403", "404", "409"} <= set(paths["/v1/users/{name}/password"]["put"]["responses"])
    body = paths["/v1/users"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["name", "password"] and body["additionalProperties"] is False


def test_a_password_change_revokes_tokens_issued_before(server: Server) -> None:
    for name in ("alice", "bob"):
        _ensure_user(server, name)
    admin = _admin(server)
    admin.add_user("erin", "erin-first-password")
    old = RestClient(server.url, user="erin", token="erin-first-password", secret_key="").login()

    # her own password, through the CLI as herself
    changed = _users_cli(server, "passwd", "erin", "--password-stdin", stdin="erin-second-password\n",
                         caller=("erin", "erin-first-password"))  # fmt: skip
    assert changed.returncode == 0 and "changed the password of erin" in changed.stdout, changed.stderr
    assert "erin-second-password" not in changed.stdout + changed.stderr
    revoked = httpx.get(f"{server.url}/v1/jobs", headers=_bearer(old), timeout=TIMEOUT)
    assert revoked.status_code == 401 and "revoked" in revoked.json()["detail"]
    assert RestClient(server.url, user="erin", token="erin-second-password", secret_key="").jobs() == []

    # not someone else's, unless a superuser; never the configured superuser's (FLUX_TOKEN sets it)
    theirs = _users_cli(
        server, "passwd", "bob", "--password-stdin", stdin="x\n", caller=("erin", "erin-second-password")
    )
    assert theirs.returncode == 2 and "only a superuser" in theirs.stderr
    assert _as(server, "bob").jobs() is not None  # bob's password is unchanged
    configured = _users_cli(server, "passwd", SUPERUSER[0], "--password-stdin", stdin="x\n")
    assert configured.returncode == 2 and "configured superuser" in configured.stderr
    unknown = _users_cli(server, "passwd", "nobody-here", "--password-stdin", stdin="x\n")
    assert unknown.returncode == 1 and "no user 'nobody-here'" in unknown.stderr

    # the in-pod tool, on the same database the running server reads: her token stops working at once
    token = RestClient(server.url, user="erin", token="erin-second-password", secret_key="").login()
    tool = subprocess.run(
        [sys.executable, "-m", "broker.rest.users_admin", "passwd", "erin", "--password-stdin",
         "--state-dir", str(server.statedir / "restful")],
        input="erin-third-password\n", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert tool.returncode == 0, tool.stderr
    assert httpx.get(f"{server.url}/v1/jobs", headers=_bearer(token), timeout=TIMEOUT).status_code == 401
    assert RestClient(server.url, user="erin", token="erin-third-password", secret_key="").jobs() == []
