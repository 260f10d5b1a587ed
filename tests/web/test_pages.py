"""The web pages over the real app (TestClient) with an in-memory job service: sign-in, access, forms."""

from __future__ import annotations

import pwd
import re
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from fastapi.testclient import TestClient

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.rest.app import create_app
from broker.rest.jobs import SubmitRequest
from broker.rest.settings import RestSettings
from broker.rest.users import UserStore
from broker.rest.web.session import CSRF_COOKIE, SESSION_COOKIE
from broker.rest.web.testing import csrf_of, sign_in

KEY = "web-test-signing-key-0123456789abcdef0123"
ADMIN = ("admin", "admin-pw")
USER = ("nobody", "nobody-pw")  # a real account (Debian has it), so multi-user mode maps it to a uid


class MemoryJobService:
    def __init__(self) -> None:
        self.records: dict[int, JobInfo] = {}
        self.outputs: dict[int, list[str]] = {}
        self.submitted: list[tuple[SubmitRequest, int]] = []
        self.cancelled: list[int] = []
        self.listed: list[tuple[int, bool]] = []  # (limit, owners) of each jobs() call
        self.commands: dict[int, list[str]] = {}
        self.next_id = 1000

    def add(
        self, name: str, userid: int, state: str = "INACTIVE", result: str = "COMPLETED", owner: str = ""
    ) -> JobInfo:
        self.next_id += 1
        job = JobInfo(
            id=self.next_id, state=state, result=result if state == "INACTIVE" else "", returncode=0,
            nnodes=1, ntasks=1, nodelist="pod-0", runtime=0.5, name=name, userid=userid, urgency=16,
            priority=16, t_submit=time.time(), t_run=time.time(), t_cleanup=0.0, t_inactive=0.0, owner=owner,
        )  # fmt: skip
        self.records[job.id] = job
        self.outputs[job.id] = [f"output of {name}\n"]
        return job

    def submit(self, request: SubmitRequest, userid: int) -> int:
        self.submitted.append((request, userid))  # the owner is kept, as the real services keep it in the jobspec
        job = self.add(request.command[0], userid, state="SCHED", owner=request.owner)
        self.commands[job.id] = list(request.command)
        return job.id

    def command(self, jobid: int) -> list[str]:
        return self.commands.get(jobid, [self.info(jobid).name])

    def jobs(self, limit: int = 1000, owners: bool = True) -> list[JobInfo]:
        self.listed.append((limit, owners))
        return sorted(self.records.values(), key=lambda j: -j.id)[:limit]

    def info(self, jobid: int) -> JobInfo:
        if jobid not in self.records:
            raise FluxError(2, f"unknown job {jobid}")
        return self.records[jobid]

    def cancel(self, jobid: int) -> None:
        self.info(jobid)
        self.cancelled.append(jobid)

    def output(self, jobid: int, offset: int = 0, wait: bool = False) -> tuple[list[str], int, bool]:
        lines = self.outputs[jobid][offset:]
        return lines, offset + len(lines), True

    def eventlog(self, jobid: int) -> list[dict[str, Any]]:
        return [{"timestamp": self.info(jobid).t_submit, "name": "submit", "context": {"userid": 0}}]

    def nodes(self) -> list[str]:
        return ["pod-0", "pod-1"]

    def shutdown(self) -> None:
        pass

    def close(self) -> None:
        pass


def make_client(tmp_path: Path, service: MemoryJobService, **settings: Any) -> TestClient:
    values: dict[str, Any] = {"token_signing_key": KEY, "superuser": ADMIN[0], "superuser_password": ADMIN[1]}
    values.update(settings)
    users = UserStore(tmp_path / "users.db", rounds=4)
    users.ensure(*USER)
    app = create_app(RestSettings(state_dir=tmp_path, **values), service, users)
    return TestClient(app, follow_redirects=False)


@pytest.fixture
def service() -> MemoryJobService:
    return MemoryJobService()


@pytest.fixture
def multi_user(tmp_path: Path, service: MemoryJobService) -> Iterator[TestClient]:
    with make_client(tmp_path, service, mode="multi-user", min_uid=0) as client:
        yield client


NOBODY_UID = pwd.getpwnam(USER[0]).pw_uid


PAGES = ("/jobs", "/jobs/submit", "/cluster", "/jobs/%C6%92JH")


@pytest.fixture
def client(tmp_path: Path, service: MemoryJobService) -> TestClient:
    return make_client(tmp_path, service)


def test_every_page_needs_a_session_when_auth_is_on(client: TestClient) -> None:
    for page in PAGES:
        answer = client.get(page)
        assert answer.status_code == 303, page
        assert answer.headers["location"].startswith("/login?next=%2F"), page
    assert client.get("/jobs/table").status_code == 401  # the live fragment: the script reloads into the login
    token = csrf_of(client.get("/login").text)
    refused = client.post("/jobs/submit", data={"command": "true", "csrf_token": token})
    assert refused.status_code == 303 and refused.headers["location"].startswith("/login")


def test_login_sets_an_httponly_strict_cookie_and_logout_clears_it(client: TestClient) -> None:
    token = csrf_of(client.get("/login").text)
    wrong = client.post("/login", data={"username": ADMIN[0], "password": "nope", "csrf_token": token})
    assert wrong.status_code == 400 and "Incorrect user name or password" in wrong.text
    assert SESSION_COOKIE not in wrong.headers.get("set-cookie", "")
    answer = client.post("/login", data={"username": ADMIN[0], "password": ADMIN[1], "csrf_token": token})
    assert answer.status_code == 303 and answer.headers["location"] == "/jobs"
    cookie = answer.headers["set-cookie"].lower()
    assert SESSION_COOKIE in cookie and "httponly" in cookie and "samesite=strict" in cookie
    page = client.get("/jobs")
    assert page.status_code == 200 and "Signed in as" in page.text
    out = client.post("/logout", data={"csrf_token": token})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert client.get("/jobs").status_code == 303


def test_forms_without_the_csrf_token_or_from_another_origin_are_refused(
    client: TestClient, service: MemoryJobService
) -> None:
    assert client.post("/login", data={"username": ADMIN[0], "password": ADMIN[1]}).status_code == 403
    token = sign_in(client, *ADMIN)
    assert client.post("/jobs/submit", data={"command": "true", "csrf_token": "x" * 40}).status_code == 403
    foreign = client.post(
        "/jobs/submit", data={"command": "true", "csrf_token": token}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403 and "another origin" in foreign.text
    assert service.submitted == []
    assert client.cookies.get(CSRF_COOKIE) == token


def test_login_never_redirects_off_the_server(client: TestClient) -> None:
    token = csrf_of(client.get("/login").text)
    for target in ("//evil.example/x", "https://evil.example", "/\\evil"):
        data = {"username": ADMIN[0], "password": ADMIN[1], "csrf_token": token, "next": target}
        assert client.post("/login", data=data).headers["location"] == "/jobs"


def test_a_removed_user_s_session_stops_working(client: TestClient) -> None:
    sign_in(client, *USER)
    assert client.get("/jobs").status_code == 200
    client.app.state.users.remove(USER[0])  # type: ignore[attr-defined]
    assert client.get("/jobs").status_code == 303


def test_users_see_only_their_own_jobs_and_others_are_404_like_missing_ones(
    multi_user: TestClient, service: MemoryJobService
) -> None:
    theirs = service.add("admins-secret-job", 0)
    mine = service.add("my-job", NOBODY_UID)
    sign_in(multi_user, *USER)
    listing = multi_user.get("/jobs").text
    assert "my-job" in listing and "admins-secret-job" not in listing
    assert "my-job" in multi_user.get("/jobs/table").text
    assert multi_user.get(f"/jobs/{mine.f58}").status_code == 200
    other, missing = multi_user.get(f"/jobs/{theirs.f58}"), multi_user.get("/jobs/999999")
    assert other.status_code == missing.status_code == 404
    assert other.text.replace(theirs.f58, "X") == missing.text.replace("999999", "X")
    for suffix in ("/status", "/output/stream"):
        assert multi_user.get(f"/jobs/{theirs.f58}{suffix}").status_code == 404
    token = multi_user.cookies.get("mc_csrf") or ""
    assert multi_user.post(f"/jobs/{theirs.f58}/cancel", data={"csrf_token": token}).status_code == 404
    assert service.cancelled == []
    multi_user.cookies.clear()
    sign_in(multi_user, *ADMIN)
    listing = multi_user.get("/jobs").text
    assert "my-job" in listing and "admins-secret-job" in listing  # the superuser sees all


def test_a_running_job_can_be_cancelled_from_its_page(client: TestClient, service: MemoryJobService) -> None:
    job = service.add("long", 0, state="RUN")
    token = sign_in(client, *ADMIN)
    page = client.get(f"/jobs/{job.f58}").text
    assert 'id="cancel"' in page
    assert client.post(f"/jobs/{job.f58}/cancel", data={}).status_code == 403  # no CSRF token: refused
    answer = client.post(f"/jobs/{job.f58}/cancel", data={"csrf_token": token})
    assert answer.status_code == 303 and service.cancelled == [job.id]
    assert 'id="cancel"' not in client.get(f"/jobs/{service.add('done', 0).f58}").text


def test_job_page_shows_fields_eventlog_and_output(client: TestClient, service: MemoryJobService) -> None:
    job = service.add("hello", 0)
    service.outputs[job.id] = ["line one\n", "line two"]
    sign_in(client, *ADMIN)
    page = client.get(f"/jobs/{job.id}")  # the decimal id works too
    assert page.status_code == 200
    assert 'data-field="state">INACTIVE' in page.text and 'data-field="result">COMPLETED' in page.text
    assert "<td>submit</td>" in page.text
    assert "line one\nline two\n</pre>" in page.text
    assert client.get(f"/jobs/{job.f58}/output/stream").text == "line one\nline two\n"
    assert "data-final" in client.get(f"/jobs/{job.f58}/status").text


def test_submit_form_validates_with_the_api_model_and_shows_errors_by_field(
    multi_user: TestClient, service: MemoryJobService
) -> None:
    token = sign_in(multi_user, *USER)
    bad = multi_user.post(
        "/jobs/submit", data={"command": "echo hi", "num_tasks": "1.5", "envars": "novalue", "csrf_token": token}
    )
    assert bad.status_code == 400 and service.submitted == []
    assert 'data-error-for="num_tasks"' in bad.text and 'data-error-for="envars"' in bad.text
    assert 'value="1.5"' in bad.text  # the user's input is kept
    empty = multi_user.post("/jobs/submit", data={"command": " ", "csrf_token": token})
    assert empty.status_code == 400 and 'data-error-for="command">is required' in empty.text
    data = {"command": "echo 'a b'", "num_tasks": "2", "envars": "A=1", "exclusive": "on", "num_nodes": "1"}
    good = multi_user.post("/jobs/submit", data={**data, "csrf_token": token})
    assert good.status_code == 303
    request, userid = service.submitted[0]
    assert request.command == ["echo", "a b"] and request.num_tasks == 2 and request.exclusive
    assert request.envars == {"A": "1"} and userid == NOBODY_UID and request.owner == USER[0]
    jobid = max(service.records)
    assert unquote(good.headers["location"]) == f"/jobs/{service.records[jobid].f58}"


def test_search_state_filter_and_paging(client: TestClient, service: MemoryJobService) -> None:
    for i in range(45):
        service.add(f"sweep-{i:02d}", 0, state="RUN" if i % 3 == 0 else "INACTIVE")
    sign_in(client, *ADMIN)
    first = client.get("/jobs").text
    assert "45 of 45 jobs, page 1 of 3" in first and "sweep-44" in first and "sweep-24" not in first
    last = client.get("/jobs?page=3").text
    assert "sweep-00" in last and 'rel="prev"' in last and 'rel="next"' not in last
    running = client.get("/jobs/table?state=running").text
    assert "15 of 45 jobs" in running and "sweep-03" in running and "sweep-04" not in running
    found = client.get("/jobs?q=sweep-1").text
    assert "10 of 45 jobs" in found and "sweep-17" in found and "sweep-27" not in found
    odd = client.get("/jobs", params={"q": "a&state=x#", "state": "running"}).text
    assert 'data-live="/jobs/table?q=a%26state%3Dx%23&amp;state=running&page=1"' in odd  # the search, kept whole


def test_no_auth_mode_needs_no_login(tmp_path: Path, service: MemoryJobService) -> None:
    service.add("open-job", 0)
    client = make_client(tmp_path, service, require_auth=False)
    assert "open-job" in client.get("/jobs").text
    assert client.get("/login").headers["location"] == "/jobs"
    assert "Log out" not in client.get("/jobs").text


class _Labels(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.controls: list[str] = []
        self.labelled: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "label" and values.get("for"):
            self.labelled.add(str(values["for"]))
        elif tag in ("input", "select", "textarea") and values.get("type") != "hidden":
            self.controls.append(str(values.get("id") or values.get("name")))


def test_every_form_control_has_a_label(client: TestClient, service: MemoryJobService) -> None:
    service.add("x", 0)
    pages = [client.get("/login").text]
    sign_in(client, *ADMIN)
    pages += [client.get(page).text for page in ("/jobs", "/jobs/submit", "/cluster")]
    seen = 0
    for html in pages:
        parser = _Labels()
        parser.feed(html)
        assert set(parser.controls) <= parser.labelled, (parser.controls, parser.labelled)
        seen += len(parser.controls)
    assert seen >= 14  # login 2, filters 2, submit 10


def test_a_tenant_without_an_account_sees_the_job_she_submitted_from_the_form(
    multi_user: TestClient, service: MemoryJobService
) -> None:
    """The form submits as the API does (access.submit_as): the owner is recorded, so a tenant with no Unix
    account on the lead finds her job on /jobs, another tenant does not, and the superuser does."""
    users = multi_user.app.state.users  # type: ignore[attr-defined]
    users.add("tenant-alice", "alice-pw")
    users.add("tenant-bob", "bob-pw")
    token = sign_in(multi_user, "tenant-alice", "alice-pw")
    answer = multi_user.post("/jobs/submit", data={"command": "alices-web-job", "csrf_token": token})
    assert answer.status_code == 303, answer.text
    job = service.records[max(service.records)]
    assert job.owner == "tenant-alice"
    assert "alices-web-job" in multi_user.get("/jobs").text and multi_user.get(f"/jobs/{job.f58}").status_code == 200
    assert [j["id"] for j in multi_user.get("/v1/jobs", auth=("tenant-alice", "alice-pw")).json()["jobs"]] == [
        job.id
    ]  # the API agrees
    multi_user.cookies.clear()
    sign_in(multi_user, "tenant-bob", "bob-pw")
    assert "alices-web-job" not in multi_user.get("/jobs").text
    assert multi_user.get(f"/jobs/{job.f58}").status_code == 404
    multi_user.cookies.clear()
    sign_in(multi_user, *ADMIN)
    assert "alices-web-job" in multi_user.get("/jobs").text


class _Lead:
    """The job service's client as the page reaches the lead: only overlay.status, with the burst service's state."""

    def __init__(self, view: dict[str, Any]) -> None:
        self.view = view
        self.handle = self

    def rpc(self, topic: str, payload: dict[str, Any], nodeid: int, timeout: float) -> dict[str, Any]:
        assert topic == "overlay.status"
        return {"ranks": [], "burst_service": self.view}


def test_the_cluster_page_shows_the_burst_service_s_state(tmp_path: Path, service: MemoryJobService) -> None:
    client = make_client(tmp_path, service)
    sign_in(client, *ADMIN)
    assert "Burst service" not in client.get("/cluster").text  # an instance the page cannot ask: nothing
    lead = _Lead({"state": "absent", "reason": "none has reported to this lead"})
    service.client = lead  # type: ignore[attr-defined]
    assert "Burst service" not in client.get("/cluster").text  # no service there: nothing to say
    lead.view = {"state": "stopped", "reason": "no report for 20 s (its process is gone or stuck)"}
    page = client.get("/cluster").text
    assert "Burst service" in page and "stopped: no report for 20 s (its process is gone or stuck)" in page


def test_the_superuser_s_queue_has_an_owner_column_and_a_user_s_does_not(
    multi_user: TestClient, service: MemoryJobService
) -> None:
    service.add("tenant-job", 0, owner="tenant-alice")
    service.add("inside-job", NOBODY_UID)  # submitted inside the pod: its owner is the account it runs as
    sign_in(multi_user, *ADMIN)
    page = multi_user.get("/jobs").text
    assert '<th scope="col">Owner</th>' in page
    assert "<td data-owner>tenant-alice</td>" in page and f"<td data-owner>{USER[0]}</td>" in page
    assert "<td data-owner>tenant-alice</td>" in multi_user.get("/jobs/table").text  # the live refresh keeps it
    assert service.listed[-1][1] is True  # the owners were asked for
    multi_user.cookies.clear()
    sign_in(multi_user, *USER)
    assert "Owner</th>" not in multi_user.get("/jobs").text


def test_the_job_page_shows_the_command(client: TestClient, service: MemoryJobService) -> None:
    token = sign_in(client, *ADMIN)
    answer = client.post("/jobs/submit", data={"command": "echo 'two words' <tag>", "csrf_token": token})
    assert answer.status_code == 303
    page = client.get(answer.headers["location"]).text
    assert 'data-field="command"><code>echo &#39;two words&#39; &#39;&lt;tag&gt;&#39;</code>' in page


def test_submit_form_labels_are_words(client: TestClient) -> None:
    sign_in(client, *ADMIN)
    page = client.get("/jobs/submit").text
    labels = dict(re.findall(r'<label for="f-([a-z_]+)">([^<]+)</label>', page))
    assert labels["num_tasks"] == "Number of tasks" and labels["gpus_per_task"] == "GPUs per task"
    assert labels["command"] == "Command (required)" and labels["workdir"] == "Working directory"
    for name, text in labels.items():
        assert "_" not in text and text != name, (name, text)


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("/jobs?page=abc", "page: must be a whole number"),
        ("/jobs?page=0", "page: must be at least 1"),
        ("/jobs/table?page=-3", "page: must be at least 1"),
        ("/jobs?q=" + "x" * 300, "q: must be at most 200 characters long"),
    ],
)
def test_bad_query_parameters_are_an_error_page(client: TestClient, address: str, words: str) -> None:
    sign_in(client, *ADMIN)
    answer = client.get(address)
    assert answer.status_code == 400 and answer.headers["content-type"].startswith("text/html")
    assert words in answer.text and "Signed in as" in answer.text  # a page of the site, not raw JSON
    assert "Input should" not in answer.text and '"detail"' not in answer.text
    api = client.get("/v1/jobs", params={"limit": "0"}, auth=ADMIN)  # the API keeps FastAPI's JSON answer
    assert api.status_code == 422 and api.headers["content-type"] == "application/json"


def test_form_errors_are_in_words_and_an_empty_or_nul_command_is_refused(
    client: TestClient, service: MemoryJobService
) -> None:
    token = sign_in(client, *ADMIN)
    bad = client.post("/jobs/submit", data={"command": "true", "num_tasks": "1.5", "csrf_token": token})
    assert bad.status_code == 400 and 'data-error-for="num_tasks">must be a whole number' in bad.text
    assert "Input should" not in bad.text
    for command, reason in (("''", "is empty"), ("echo a\x00b", "NUL byte")):
        refused = client.post("/jobs/submit", data={"command": command, "csrf_token": token})
        assert refused.status_code == 400 and reason in refused.text, refused.text
    assert service.submitted == []


def test_gpus_the_cluster_lacks_are_refused_by_the_form_and_the_api(
    client: TestClient, service: MemoryJobService
) -> None:
    from broker.rest.submit import check_gpus

    def no_gpus(request: SubmitRequest, userid: int) -> int:
        check_gpus(request, 0)
        return MemoryJobService.submit(service, request, userid)

    service.submit = no_gpus  # type: ignore[method-assign]
    token = sign_in(client, *ADMIN)
    page = client.post("/jobs/submit", data={"command": "true", "gpus_per_task": "1", "csrf_token": token})
    assert page.status_code == 400 and 'data-error-for="gpus_per_task">this cluster has no GPUs' in page.text
    api = client.post("/v1/jobs/submit", json={"command": "true", "gpus_per_task": 1}, auth=ADMIN)
    assert api.status_code == 400 and api.json()["Errors"][0].startswith("gpus_per_task: this cluster has no GPUs")
    assert service.submitted == []


def test_api_listing_asks_for_job_list_s_cap_and_owners_only_when_needed(
    multi_user: TestClient, service: MemoryJobService
) -> None:
    service.add("a", 0)
    assert multi_user.get("/v1/jobs", params={"details": "true"}, auth=ADMIN).status_code == 200
    assert service.listed[-1] == (1000, False)  # the superuser sees every job: no owner needed
    assert multi_user.get("/v1/jobs", params={"limit": 5000}, auth=ADMIN).status_code == 200
    assert service.listed[-1] == (5000, False)
    assert multi_user.get("/v1/jobs", auth=USER).status_code == 200
    assert service.listed[-1] == (1000, True)  # a user sees their own: owners decide


def test_api_submit_refuses_nul_bytes_and_empty_commands_naming_the_field(
    client: TestClient, service: MemoryJobService
) -> None:
    for body, field in (
        ({"command": "echo a\x00b"}, "command"),
        ({"command": ["", "x"]}, "command"),
        ({"command": "true", "workdir": "/tmp\x00"}, "workdir"),
        ({"command": "true", "envars": {"A": "\x00"}}, "envars"),
    ):
        answer = client.post("/v1/jobs/submit", json=body, auth=ADMIN)
        assert answer.status_code == 400, answer.text
        assert answer.json()["Errors"][0].startswith(f"{field}: "), answer.json()
    assert service.submitted == []
