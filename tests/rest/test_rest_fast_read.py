"""The fast path for `GET /v1/jobs/{id}` (broker/rest/fast_read.py): taken only for plain reads, and every answer
it gives is the route's, byte for byte."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import HTTPException
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from broker.rest.fast_read import FastJobRead, FrontedFastAPI
from broker.rest.testing import SIGNING_KEY, SUPERUSER, Server
from broker.rest.tokens import issue_access_token
from tests.waiting import wait_until


class Inner:
    """The app behind the middleware: records what reached it."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"route"})


def _client(answer: Any) -> tuple[TestClient, Inner, list[tuple[str, str]]]:
    asked: list[tuple[str, str]] = []

    async def read(jobid: str, authorization: str) -> Any:
        asked.append((jobid, authorization))
        return answer

    inner = Inner()
    return TestClient(FastJobRead(inner, read=read)), inner, asked


def test_a_plain_read_is_answered_without_the_route() -> None:
    client, inner, asked = _client(b'{"id":7}')
    response = client.get("/v1/jobs/f2pGN", headers={"Authorization": "Bearer abc"})
    assert (response.status_code, response.content) == (200, b'{"id":7}')
    assert response.headers["content-type"] == "application/json" and response.headers["content-length"] == "8"
    assert asked == [("f2pGN", "Bearer abc")] and inner.paths == []


@pytest.mark.parametrize(
    ("method", "path", "extra"),
    [
        ("GET", "/v1/jobs/7?x=1", {}),  # a query string: the route's parameters apply
        ("POST", "/v1/jobs/7", {}),
        ("GET", "/v1/jobs/search", {}),  # a route of its own
        ("GET", "/v1/jobs/7/output", {}),
        ("GET", "/v1/jobs", {}),
        ("GET", "/v1/jobs/7", {"content": b"x"}),  # a GET with a body: the body limit decides
    ],
)
def test_anything_else_goes_to_the_route_unread(method: str, path: str, extra: dict[str, Any]) -> None:
    client, inner, asked = _client(b"{}")
    response = client.request(method, path, **extra)
    assert (response.status_code, response.content) == (299, b"route")
    assert asked == [] and inner.paths == [path.split("?")[0]]


def test_a_read_declined_goes_to_the_route_and_an_error_is_fastapi_s() -> None:
    client, inner, _ = _client(None)
    assert client.get("/v1/jobs/7").status_code == 299 and inner.paths == ["/v1/jobs/7"]
    client, inner, _ = _client(HTTPException(404, "there is no job 7"))
    response = client.get("/v1/jobs/7")
    assert (response.status_code, response.json()) == (404, {"detail": "there is no job 7"}) and inner.paths == []


def _fronted_app() -> tuple[FrontedFastAPI, list[str], list[str]]:
    """A FrontedFastAPI with a route and a middleware of its own, each recording the paths that reached it."""
    app = FrontedFastAPI()
    routed: list[str] = []
    middled: list[str] = []

    @app.get("/v1/jobs/{jobid}")
    def route(jobid: str) -> dict[str, str]:
        routed.append(jobid)
        return {"from": "route"}

    @app.middleware("http")
    async def record(request: Any, call_next: Any) -> Any:
        middled.append(request.url.path)
        return await call_next(request)

    async def read(jobid: str, authorization: str) -> bytes | None:
        return b'{"from":"front"}' if jobid == "fast" else None

    app.front = lambda stack: FastJobRead(stack, read=read)
    return app, routed, middled


def test_the_front_answers_before_anything_fastapi_runs_and_passes_the_rest_on() -> None:
    app, routed, middled = _fronted_app()
    with TestClient(app) as client:  # the lifespan goes through the front to the app
        assert client.get("/v1/jobs/fast").json() == {"from": "front"}
        assert routed == [] and middled == []  # not even the app's own middleware saw it
        assert client.get("/v1/jobs/slow").json() == {"from": "route"}
        assert routed == ["slow"] and middled == ["/v1/jobs/slow"]
        assert client.get("/openapi.json").status_code == 200


def test_without_a_front_it_is_fastapi() -> None:
    app, routed, _ = _fronted_app()
    app.front = None
    with TestClient(app) as client:
        assert client.get("/v1/jobs/fast").json() == {"from": "route"} and routed == ["fast"]


def test_the_rest_api_app_puts_the_one_job_read_in_front(tmp_path: Path) -> None:
    from broker.rest.app import create_app
    from broker.rest.jobs import BrokerJobService
    from broker.rest.settings import RestSettings

    (tmp_path / "local-0").touch()  # a socket path (ZeroMQ connects lazily)
    settings = RestSettings(state_dir=tmp_path, require_auth=False)
    app = create_app(settings, BrokerJobService(f"local://{tmp_path}/local-0"))
    assert isinstance(app, FrontedFastAPI) and app.front is not None
    assert isinstance(app.front(app), FastJobRead)


def _token(server: Server) -> str:
    body = httpx.post(f"{server.url}/v1/token", auth=SUPERUSER).json()
    return str(body["access_token"])


def _answer(response: httpx.Response) -> tuple[int, bytes, str, str | None]:
    return (
        response.status_code,
        response.content,
        response.headers.get("content-type", ""),
        response.headers.get("www-authenticate"),
    )


def test_the_fast_answers_are_the_route_s(server: Server) -> None:
    """The same request with a query string the route ignores goes through FastAPI's route: every answer
    (a job, an unknown or malformed id, missing, bad, expired or Basic credentials) is the same both ways."""
    token = _token(server)
    bearer = {"Authorization": f"Bearer {token}"}
    submitted = httpx.post(f"{server.url}/v1/jobs/submit", json={"command": ["true"]}, headers=bearer).json()
    jobid = submitted["id"]
    wait_until(
        "the job ends",
        lambda: httpx.get(f"{server.url}/v1/jobs/{jobid}", headers=bearer).json()["state"] == "INACTIVE",
        timeout=30,
    )
    expired = issue_access_token(SUPERUSER[0], SIGNING_KEY, minutes=1, now=time.time() - 3600)
    cases = [
        (str(jobid), bearer),
        ("ƒ2pGN", bearer),  # an F58 id nobody has
        ("123456789", bearer),
        ("not-an-id", bearer),
        (str(jobid), {}),
        (str(jobid), {"Authorization": "Bearer garbage"}),
        (str(jobid), {"Authorization": f"Bearer {expired}"}),
    ]
    for path_id, headers in cases:
        fast = httpx.get(f"{server.url}/v1/jobs/{path_id}", headers=headers)
        routed = httpx.get(f"{server.url}/v1/jobs/{path_id}", params={"via": "route"}, headers=headers)
        assert _answer(fast) == _answer(routed), (path_id, headers)
    basic = httpx.get(f"{server.url}/v1/jobs/{jobid}", auth=SUPERUSER)
    assert (
        basic.status_code == 200 and basic.content == httpx.get(f"{server.url}/v1/jobs/{jobid}", headers=bearer).content
    )
    assert httpx.get(f"{server.url}/v1/jobs/{jobid}", headers=bearer).json()["id"] == jobid
