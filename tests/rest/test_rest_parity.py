"""Parity with the reference server: one request script against flux-restful 1.1.0 (from PyPI) on real flux-core,
and against ours (both flavours); status codes, field names and field types must agree, so drift fails here.

Ours may answer with more fields than the reference (a superset is what clients that parse the answer need);
the deliberate differences are listed in docs/rest.md and in DIFFERENT below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from broker.rest import testing
from broker.rest.testing import SECRET_KEY, SUPERUSER, start_server
from broker.rest.tokens import encode_handshake
from miniclusters.backends.local.flux_view import FluxCore
from tests.waiting import wait_until

# Steps whose answers differ on purpose (docs/rest.md, where we differ on purpose)
DIFFERENT = {
    "list with detail=true": "the 0.2.1 client sends detail=true; the reference reads only details and lists ids",
}


@dataclass
class Answer:
    status: int
    body: Any
    headers: httpx.Headers


@dataclass
class Session:
    """One server, logged in; `ids` carries job ids from one step to the next."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)

    def call(self, method: str, path: str, auth: bool = True, **kwargs: Any) -> Answer:
        headers = {**(self.headers if auth else {}), **kwargs.pop("headers", {})}
        response = httpx.request(method, self.url + path, headers=headers, timeout=30, **kwargs)
        try:
            body = response.json()
        except ValueError:
            body = response.text
        return Answer(response.status_code, body, response.headers)

    def wait_inactive(self, jobid: int) -> None:
        wait_until(
            f"job {jobid} ends on {self.url}",
            lambda: self.call("GET", f"/v1/jobs/{jobid}").body.get("state") == "INACTIVE",
            timeout=60,
            interval=0.1,
        )


def _login(url: str) -> Session:
    token = encode_handshake(SUPERUSER[0], SUPERUSER[1], SECRET_KEY)
    answer = httpx.post(f"{url}/v1/token", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.status_code == 200, (url, answer.text)
    return Session(url, {"Authorization": f"Bearer {answer.json()['access_token']}"})


def _submit(s: Session, name: str, **params: str) -> Answer:
    answer = s.call("POST", "/v1/jobs/submit", params=params)
    if answer.status == 200:
        s.ids[name] = int(answer.body["id"])
    return answer


def _finished(s: Session, name: str) -> Answer:
    s.wait_inactive(s.ids[name])
    return s.call("GET", f"/v1/jobs/{s.ids[name]}")


def _cancel_running(s: Session) -> Answer:
    jobid = s.ids["sleeper"]
    wait_until(f"job {jobid} runs", lambda: s.call("GET", f"/v1/jobs/{jobid}").body.get("state") == "RUN", interval=0.1)
    answer = s.call("POST", f"/v1/jobs/{jobid}/cancel")
    s.wait_inactive(jobid)
    return answer


# The request script: (step name, request). Every server gets exactly these requests, in this order.
SCRIPT: list[tuple[str, Callable[[Session], Answer]]] = [
    ("auth description", lambda s: s.call("GET", "/v1/auth", auth=False)),
    ("no credentials", lambda s: s.call("GET", "/v1/jobs", auth=False)),
    ("malformed bearer", lambda s: s.call("GET", "/v1/jobs", auth=False, headers={"Authorization": "Bearer x.y"})),
    (
        "handshake with a wrong password",
        lambda s: s.call(
            "POST",
            "/v1/token",
            auth=False,
            headers={"Authorization": f"Bearer {encode_handshake(SUPERUSER[0], 'wrong', SECRET_KEY)}"},
        ),
    ),
    (
        "submit with envars as a dict literal",
        lambda s: _submit(s, "echo", command="sh -c 'echo $GREETING'", envars=str({"GREETING": "hi"})),
    ),
    ("submit a failing job", lambda s: _submit(s, "fails", command="sh -c 'exit 3'", num_tasks="1")),
    ("submit a sleeper", lambda s: _submit(s, "sleeper", command="sleep 300", num_nodes="1")),
    ("submit without command", lambda s: s.call("POST", "/v1/jobs/submit", params={"num_tasks": "1"})),
    ("info of a finished job", lambda s: _finished(s, "echo")),
    ("info of a failed job", lambda s: _finished(s, "fails")),
    ("output", lambda s: s.call("GET", f"/v1/jobs/{s.ids['echo']}/output")),
    ("cancel a running job", _cancel_running),
    ("info of a canceled job", lambda s: s.call("GET", f"/v1/jobs/{s.ids['sleeper']}")),
    ("list", lambda s: s.call("GET", "/v1/jobs")),
    ("list with details", lambda s: s.call("GET", "/v1/jobs", params={"details": "true"})),
    ("list with details as a list", lambda s: s.call("GET", "/v1/jobs", params={"details": "true", "listing": "true"})),
    ("list with detail=true", lambda s: s.call("GET", "/v1/jobs", params={"detail": "true", "listing": "true"})),
    ("search", lambda s: s.call("GET", "/v1/jobs/search", params={"length": "2"})),
    ("cancel a finished job", lambda s: s.call("POST", f"/v1/jobs/{s.ids['echo']}/cancel")),
    ("cancel an unknown job", lambda s: s.call("POST", "/v1/jobs/123/cancel")),
    ("output of an unknown job", lambda s: s.call("GET", "/v1/jobs/123/output")),
    ("info of an unknown job", lambda s: s.call("GET", "/v1/jobs/123")),
    ("info of a malformed id", lambda s: s.call("GET", "/v1/jobs/not-a-job-id")),
    ("nodes", lambda s: s.call("GET", "/v1/nodes")),
]


def shape(value: Any) -> Any:
    """Field names and types, values dropped."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def differences(reference: Any, ours: Any, where: str = "") -> list[str]:
    """What a client written against the reference would find missing or of another type in ours."""
    if isinstance(reference, dict) and isinstance(ours, dict):
        found = []
        for key, item in reference.items():
            if key not in ours:
                found.append(f"{where}.{key}: missing")
            else:
                found += differences(item, ours[key], f"{where}.{key}")
        return found
    if isinstance(reference, list) and isinstance(ours, list):
        if reference and not ours:
            return [f"{where}: empty here, not in the reference"]
        return differences(reference[0], ours[0], f"{where}[0]") if reference else []
    return [] if reference == ours else [f"{where}: {ours} here, {reference} in the reference"]


def _keyed_by_id(body: Any) -> Any:
    """`details` without `listing` is keyed by job id: compare one record, not the (different) ids."""
    if isinstance(body, dict) and body and all(key.isdigit() for key in body):
        return {"<jobid>": next(iter(body.values()))}
    return body


# ------------------------------------------------------------------ the servers
@pytest.fixture(scope="module")
def real_flux(flux_core: FluxCore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real flux-core instance of two brokers; the environment that reaches it and its Python bindings.

    `flux_core` (tests/conftest.py) fails under CI when the build is missing: `make test` builds it first.
    """
    bindings = flux_core.python_path
    if bindings is None:
        pytest.fail(f"flux-core at {flux_core.prefix} has no Python bindings (lib/python3*/site-packages/flux)")
    with testing.real_flux(flux_core.flux, bindings, tmp_path_factory.mktemp("realflux")) as env:
        yield env


@pytest.fixture(scope="module")
def reference(real_flux: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """flux-restful 1.1.0 (PyPI), as its README runs it: a user database, then uvicorn."""
    with testing.reference_server(real_flux, tmp_path_factory.mktemp("reference")) as url:
        yield url


@pytest.fixture(scope="module")
def ours_on_flux(real_flux: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Our server, flux flavour, on the same real instance."""
    with testing.flux_flavour_server(real_flux, tmp_path_factory.mktemp("ours-flux")) as url:
        yield url


@pytest.fixture(scope="module")
def ours_builtin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Our server on our own broker (the default flavour)."""
    for server in start_server(tmp_path_factory.mktemp("ours-builtin"), size=2):
        yield server.url


@pytest.fixture(scope="module")
def reference_answers(reference: str) -> dict[str, Answer]:
    session = _login(reference)
    return {name: request(session) for name, request in SCRIPT}


@pytest.mark.parametrize("flavour", ["flux", "builtin"])
def test_ours_answers_as_the_reference_does(
    flavour: str, reference_answers: dict[str, Answer], request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("ours_on_flux" if flavour == "flux" else "ours_builtin")
    session = _login(url)
    ours = {name: call(session) for name, call in SCRIPT}
    problems = []
    for name, _call in SCRIPT:
        theirs, mine = reference_answers[name], ours[name]
        if name in DIFFERENT:
            continue
        if theirs.status != mine.status:
            problems.append(f"{name}: status {mine.status} here, {theirs.status} in the reference ({mine.body})")
            continue
        for problem in differences(shape(_keyed_by_id(theirs.body)), shape(_keyed_by_id(mine.body))):
            problems.append(f"{name}: {problem}")
    assert not problems, "\n".join(problems)

    # where we differ on purpose, we differ as documented
    assert ours["no credentials"].headers["www-authenticate"].startswith("Bearer")
    assert ours["handshake with a wrong password"].body["Message"] == "Denied"
    assert ours["output"].body == {"Output": ["hi\n"]}  # envars applied (the reference drops them)
    assert reference_answers["output"].body == {"Output": ["\n"]}
    detailed = ours["list with detail=true"].body
    assert isinstance(detailed, list) and detailed and "returncode" in detailed[0]  # detail= works like details=
    assert ours["cancel a running job"].body["id"] == str(session.ids["sleeper"])  # a string, as the reference's
