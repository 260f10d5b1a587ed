"""The REST API on a live instance: every endpoint, both auth flows, expiry, streaming, bad input."""

from __future__ import annotations

import base64
import time

import httpx
import jwt
import pytest

from broker.jobs.shapes import JobListRecord as JobRecord
from broker.rest.client import RestClient, RestError
from broker.rest.testing import SECRET_KEY, SIGNING_KEY, SUPERUSER, Server
from broker.rest.tokens import encode_handshake, issue_access_token
from tests.waiting import wait_until

PUBLIC = {"/v1/token", "/v1/login/access-token", "/v1/auth"}  # /v1/auth says how to log in
# The custom metrics API is read by the Kubernetes API aggregator for HPAs (it authenticates the caller itself and
# carries no bearer token of ours); it serves counts only, never jobs (broker/rest/metrics.py).
METRICS = "/apis/custom.metrics.k8s.io/v1beta2"


@pytest.fixture
def client(server: Server) -> RestClient:
    return RestClient(server.url, user=SUPERUSER[0], token=SUPERUSER[1], secret_key=SECRET_KEY)


def _token(server: Server) -> str:
    return RestClient(server.url, user=SUPERUSER[0], token=SUPERUSER[1], secret_key=SECRET_KEY).login()


def _wait_done(client: RestClient, jobid: int, timeout: float = 30) -> JobRecord:
    def ended() -> JobRecord | None:
        job = client.job(jobid)
        return job if job["state"] == "INACTIVE" else None

    return wait_until(f"job {jobid} ends", ended, timeout=timeout, interval=0.1, detail=lambda: client.job(jobid))


def test_openapi_lists_every_endpoint(server: Server) -> None:
    paths = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    expected = {
        "/v1/token", "/v1/login/access-token", "/v1/jobs", "/v1/jobs/search", "/v1/jobs/submit",
        "/v1/jobs/{jobid}", "/v1/jobs/{jobid}/output", "/v1/jobs/{jobid}/output/stream",
        "/v1/jobs/{jobid}/cancel", "/v1/nodes", "/v1/service/stop",
    }  # fmt: skip
    assert expected <= set(paths)


def test_nothing_answers_without_credentials(server: Server) -> None:
    paths = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    for path, operations in paths.items():
        if path in PUBLIC or path.startswith(METRICS):
            continue
        for method in operations:
            response = httpx.request(method.upper(), server.url + path.replace("{jobid}", "1"))
            assert response.status_code == 401, (method, path, response.text)
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer realm=") and "/v1/token" in challenge


def test_handshake_flow_submit_info_output(client: RestClient, server: Server) -> None:
    jobid = client.submit("sh -c 'echo hello from $FLUX_JOB_ID; exit 3'", num_tasks=1)
    job = _wait_done(client, jobid)
    assert client.access_token  # got one through 401 -> /v1/token
    assert job["result"] == "FAILED" and job["returncode"] == 3
    assert job["nnodes"] == 1 and job["nodelist"]
    assert client.output(jobid) == [f"hello from {jobid}\n"]  # raw lines, newline kept, as upstream
    assert any(j["id"] == jobid for j in client.jobs())


def test_submit_parameters_by_query_json_and_form(server: Server) -> None:
    headers = {"Authorization": f"Bearer {_token(server)}"}
    client = RestClient(server.url, user=SUPERUSER[0], token=SUPERUSER[1], secret_key=SECRET_KEY)
    query = httpx.post(
        f"{server.url}/v1/jobs/submit",
        params={"command": "printenv FLUX_TASK_RANK", "num_tasks": "2", "num_nodes": "2"},
        headers=headers,
    )
    body = httpx.post(
        f"{server.url}/v1/jobs/submit",
        json={"command": ["sh", "-c", 'echo "$MYVAR ${FLUX_TOKEN:-no-secret}"'], "envars": {"MYVAR": "from-json"}},
        headers=headers,
    )
    form = httpx.post(f"{server.url}/v1/jobs/submit", data={"command": "echo form"}, headers=headers)
    for response in (query, body, form):
        assert response.status_code == 200, response.text
        assert response.json()["Message"] == "Job submit."
    two_nodes = _wait_done(client, query.json()["id"])
    assert two_nodes["nnodes"] == 2 and two_nodes["result"] == "COMPLETED"
    assert (
        sorted(client.output(query.json()["id"])) == ["127.0.0.1\n", "127.0.0.2\n"]
        or len(client.output(query.json()["id"])) == 2
    )
    _wait_done(client, body.json()["id"])
    assert client.output(body.json()["id"]) == ["from-json no-secret\n"]  # the server's token stays private
    _wait_done(client, form.json()["id"])
    assert client.output(form.json()["id"]) == ["form\n"]


def test_oauth2_password_login(server: Server) -> None:
    response = httpx.post(
        f"{server.url}/v1/login/access-token", data={"username": SUPERUSER[0], "password": SUPERUSER[1]}
    )
    assert response.status_code == 200 and response.json()["token_type"] == "bearer"
    nodes = httpx.get(f"{server.url}/v1/nodes", headers={"Authorization": f"Bearer {response.json()['access_token']}"})
    assert nodes.status_code == 200 and len(nodes.json()["nodes"]) == 2
    wrong = httpx.post(f"{server.url}/v1/login/access-token", data={"username": SUPERUSER[0], "password": "no"})
    assert wrong.status_code == 400 and wrong.json()["Message"] == "Denied"  # not 401: clients would come back


def test_basic_credentials_exchange(server: Server) -> None:
    response = httpx.post(f"{server.url}/v1/token", auth=SUPERUSER)
    assert response.status_code == 200 and response.json()["token_type"] == "Bearer"
    assert httpx.post(f"{server.url}/v1/token", auth=(SUPERUSER[0], "bad")).status_code == 400


@pytest.mark.parametrize("kind", ["expired", "tampered", "wrong-secret", "handshake-as-access", "garbage"])
def test_bad_tokens_get_401(server: Server, kind: str) -> None:
    good = _token(server)
    token = {
        "expired": issue_access_token(SUPERUSER[0], SIGNING_KEY, minutes=1, now=time.time() - 3600),
        "tampered": good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB"),
        "wrong-secret": issue_access_token(SUPERUSER[0], "some-other-key-0123456789abcdef0123456789", minutes=5),
        "handshake-as-access": encode_handshake(SUPERUSER[0], SUPERUSER[1], SECRET_KEY),
        "garbage": "not.a.token",
    }[kind]
    response = httpx.get(f"{server.url}/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401 and "www-authenticate" in response.headers
    detail = response.json()["detail"]
    assert detail == ("access token expired" if kind == "expired" else "invalid token") or kind == "handshake-as-access"
    assert "decode" not in detail.lower() and "segment" not in detail.lower()  # no decoder internals


def test_handshake_signed_with_the_wrong_secret_is_refused(server: Server) -> None:
    forged = jwt.encode({"user": SUPERUSER[0], "pass": SUPERUSER[1], "scope": "token"}, "x" * 40, algorithm="HS256")
    response = httpx.post(f"{server.url}/v1/token", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 400 and response.json() == {"Message": "Denied", "detail": "invalid token"}


def test_streaming_follows_a_running_job(client: RestClient) -> None:
    jobid = client.submit("sh -c 'for i in 1 2 3 4; do echo line $i; sleep 0.6; done'")
    lines: list[str] = []
    for line in client.stream(jobid):
        if not lines:
            state_at_first_line = client.job(jobid)["state"]
        lines.append(line)
    assert lines == ["line 1", "line 2", "line 3", "line 4"]
    assert state_at_first_line == "RUN"  # the first line came while the job was still running
    assert client.job(jobid)["state"] == "INACTIVE"


def test_cancel(client: RestClient) -> None:
    jobid = client.submit("sleep 60")
    wait_until(f"job {jobid} runs", lambda: client.job(jobid)["state"] == "RUN", timeout=20, interval=0.1)
    assert "cancel" in client.cancel(jobid).lower()
    job = _wait_done(client, jobid)
    assert job["result"] == "CANCELED"


def test_search_endpoint(client: RestClient, server: Server) -> None:
    jobid = client.submit("true")
    _wait_done(client, jobid)
    response = client.request("GET", "/v1/jobs/search", params={"query": "true", "draw": 3})
    body = response.json()
    assert body["draw"] == 3 and body["recordsFiltered"] >= 1 and body["recordsTotal"] >= body["recordsFiltered"]
    assert jobid in [job["id"] for job in body["data"]]
    nothing = client.request("GET", "/v1/jobs/search", params={"query": "no-job-has-this-name"}).json()
    assert nothing["recordsFiltered"] == 0 and nothing["data"] == []
    detail = client.request("GET", "/v1/jobs", params={"detail": True}).json()
    assert str(jobid) in detail


@pytest.mark.parametrize(
    ("kwargs", "status", "fragment"),
    [
        ({"params": {"num_tasks": "2"}}, 400, "command"),
        ({"params": {"command": "true", "num_tasks": "many"}}, 400, "num_tasks"),
        ({"params": {"command": "true", "num_nodes": "99"}}, 400, "unsatisfiable"),
        ({"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "body"),
        ({"json": [1, 2]}, 400, "body"),
        ({"content": b"x" * (2 << 20), "headers": {"content-type": "application/json"}}, 413, "larger"),
    ],
)
def test_bad_submissions(server: Server, kwargs: dict, status: int, fragment: str) -> None:
    headers = {"Authorization": f"Bearer {_token(server)}", **kwargs.pop("headers", {})}
    response = httpx.post(f"{server.url}/v1/jobs/submit", headers=headers, **kwargs)
    assert response.status_code == status, response.text
    assert fragment in response.text


def test_gpus_per_task_is_refused_by_the_builtin_broker_not_ignored(client: RestClient, server: Server) -> None:
    """The built-in broker schedules no GPUs: a GPU request is a 400 naming the field, and no job is made."""
    before = len(client.jobs(detail=False))
    headers = {"Authorization": f"Bearer {_token(server)}"}
    for kwargs in (
        {"params": {"command": "true", "gpus_per_task": "1"}},
        {"json": {"command": "true", "gpus_per_task": 2}},
    ):
        response = httpx.post(f"{server.url}/v1/jobs/submit", headers=headers, **kwargs)
        assert response.status_code == 400, response.text
        assert response.json()["Errors"][0].startswith("gpus_per_task: this cluster has no GPUs"), response.text
    assert (
        httpx.post(
            f"{server.url}/v1/jobs/submit", headers=headers, json={"command": "true", "gpus_per_task": 0}
        ).status_code
        == 200
    )
    assert len(client.jobs(detail=False)) == before + 1  # only the one that asked for none


def test_unknown_and_malformed_job_ids(client: RestClient) -> None:
    with pytest.raises(RestError) as missing:
        client.job(123456789)
    assert missing.value.status == 404
    with pytest.raises(RestError) as malformed:
        client.job("not-an-id")
    assert malformed.value.status == 400 and "jobid" in malformed.value.message


def test_basic_auth_header_with_bad_encoding(server: Server) -> None:
    response = httpx.get(f"{server.url}/v1/jobs", headers={"Authorization": "Basic %%%"})
    assert response.status_code == 401
    encoded = base64.b64encode(b"no-colon").decode()
    assert httpx.get(f"{server.url}/v1/jobs", headers={"Authorization": f"Basic {encoded}"}).status_code == 401


def test_burstable_submit_field_waits_for_a_burst_instead_of_being_refused(server: Server) -> None:
    headers = {"Authorization": f"Bearer {_token(server)}"}
    client = RestClient(server.url, user=SUPERUSER[0], token=SUPERUSER[1], secret_key=SECRET_KEY)
    params = {"command": "true", "num_tasks": "99", "num_nodes": "99", "burstable": "true"}
    response = httpx.post(f"{server.url}/v1/jobs/submit", params=params, headers=headers)
    assert response.status_code == 200, response.text  # without `burstable` the same request is unsatisfiable
    jobid = response.json()["id"]
    job = client.job(jobid)
    assert job["state"] == "SCHED" and job["nnodes"] == 99
    client.cancel(jobid)
    assert _wait_done(client, jobid)["result"] == "CANCELED"
