"""What broke when the REST API was tried as a new user would: the public client, odd numbers, keys, the schema."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import httpx
import pytest

from broker.rest.client import RestClient
from broker.rest.submit import SubmitError, parse_submit
from broker.rest.testing import SECRET_KEY, SUPERUSER, Server


def _bearer(server: Server) -> dict[str, str]:
    token = RestClient(server.url, user=SUPERUSER[0], token=SUPERUSER[1], secret_key=SECRET_KEY).login()
    return {"Authorization": f"Bearer {token}"}


def _public_client(server: Server, password: str, script: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The upstream flux-restful-client (from PyPI), in a child process so a hang is a timeout, not a stuck test."""
    program = textwrap.dedent(
        f"""
        import json, time
        from flux_restful_client.main.client import FluxRestfulClient
        cli = FluxRestfulClient(host={server.url!r}, user={SUPERUSER[0]!r}, token={password!r},
                                secret_key={SECRET_KEY!r}, attempts=0)
        """
    )
    return subprocess.run(
        [sys.executable, "-c", program + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_public_client_with_a_wrong_password_gets_an_answer(server: Server) -> None:
    # before: 401 from /v1/token sent the client back to /v1/token, forever (a subprocess timeout here); now one
    # 401, one refused handshake, done: no loop
    proc = _public_client(server, "wrong-password", "print(json.dumps(cli.jobs()))", timeout=30)
    assert "RecursionError" not in proc.stderr
    # client 0.2.1 then logs the refusal with `response.reason`, which httpx responses lack: its own bug, but it
    # proves the client took the "token refused" branch instead of retrying
    assert proc.returncode == 0 or "Issue requesting token" in proc.stderr or "reason" in proc.stderr, proc.stderr


def test_a_denied_handshake_is_400_denied_and_protected_endpoints_stay_401(server: Server) -> None:
    from broker.rest.tokens import encode_handshake

    wrong = encode_handshake(SUPERUSER[0], "wrong-password", SECRET_KEY)
    for headers in ({"Authorization": f"Bearer {wrong}"}, {"Authorization": "Bearer not.a.jwt"}, {}):
        response = httpx.post(f"{server.url}/v1/token", headers=headers)
        assert response.status_code == 400, response.text
        assert response.json()["Message"] == "Denied"
        assert "www-authenticate" not in response.headers
    protected = httpx.get(f"{server.url}/v1/jobs", headers={"Authorization": "Bearer not.a.jwt"})
    assert protected.status_code == 401 and protected.headers["www-authenticate"].startswith("Bearer realm=")
    assert protected.json() == {"detail": "invalid token"}


def test_the_public_client_submits_with_envars_and_reads_back(server: Server) -> None:
    script = """
        first = cli.submit("sh -c 'echo $GREETING-$OTHER'", num_tasks=1, envars={"GREETING": "hi", "OTHER": "x y"})
        # the second request already has a token: the envars dict travels as a Python literal in the query string
        second = cli.submit("sh -c 'echo $GREETING'", envars={"GREETING": "again"}, option_flags={"a": "b"})
        ids = [first["id"], second["id"]]
        for jobid in ids:
            for _ in range(200):
                if cli.jobs(jobid)["state"] == "INACTIVE":
                    break
                time.sleep(0.1)
        print(json.dumps([cli.output(jobid) for jobid in ids]))
        print(json.dumps(cli.cancel(ids[0])))
    """
    proc = _public_client(server, SUPERUSER[1], script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    outputs = __import__("json").loads(lines[0])
    assert outputs == [{"Output": ["hi-x y\n"]}, {"Output": ["again\n"]}]
    cancelled = __import__("json").loads(lines[1])
    assert isinstance(cancelled["id"], str)  # as the reference server answers


@pytest.mark.parametrize("field", ["num_tasks", "num_nodes", "runtime", "cores_per_task"])
@pytest.mark.parametrize("number", ["1e309", "Infinity", "-Infinity", "NaN", "1.5"])
def test_odd_numbers_are_400_naming_the_field(server: Server, field: str, number: str) -> None:
    body = f'{{"command": "hostname", "{field}": {number}}}'.encode()
    response = httpx.post(
        f"{server.url}/v1/jobs/submit",
        content=body,
        headers={**_bearer(server), "content-type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert any(error.startswith(f"{field}:") for error in response.json()["Errors"]), response.text
    query = httpx.post(
        f"{server.url}/v1/jobs/submit", params={"command": "hostname", field: number}, headers=_bearer(server)
    )
    assert query.status_code == 400 and f"{field}:" in query.text, query.text


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"command": "true", "num_tasks": 1.5}, "num_tasks"),
        ({"command": "true", "num_tasks": float("inf")}, "num_tasks"),
        ({"command": "true", "num_nodes": 10**400}, "num_nodes"),
        ({"command": "true", "runtime": 2.5}, "runtime"),
        ({"command": "true", "gpus_per_task": "1.0e3"}, "gpus_per_task"),
        ({"command": 5}, "command"),
        ({"command": ["ok", 3]}, "command"),
        ({"command": "true", "workdir": 7}, "workdir"),
        ({"command": "true", "envars": "{'A': 1, 'B': [2]}"}, "envars"),
        ({"command": "true", "envars": "{not python"}, "envars"),
        ({"command": "true", "option_flags": ["a"]}, "option_flags"),
    ],
)
def test_every_submit_field_is_validated(params: dict, field: str) -> None:
    with pytest.raises(SubmitError) as caught:
        parse_submit(params)
    assert any(error.startswith(f"{field}:") for error in caught.value.errors), caught.value.errors


def test_envars_as_a_python_dict_literal() -> None:
    request = parse_submit({"command": "true", "envars": "{'A': 'one', 'B': 2}"})
    assert request.envars == {"A": "one", "B": "2"}


def test_openapi_describes_the_submit_bodies_and_error_answers(server: Server) -> None:
    document = httpx.get(f"{server.url}/openapi.json").json()
    submit = document["paths"]["/v1/jobs/submit"]["post"]
    content = submit["requestBody"]["content"]
    assert {"application/json", "application/x-www-form-urlencoded"} <= set(content)
    properties = content["application/json"]["schema"]["properties"]
    assert {"command", "num_tasks", "num_nodes", "runtime", "envars", "option_flags", "workdir"} <= set(properties)
    assert properties["num_tasks"]["anyOf"][0]["type"] == "integer"
    assert {"400", "401"} <= set(submit["responses"])
    assert {p["name"] for p in submit["parameters"] if p["in"] == "query"} >= {"command", "num_tasks", "envars"}
    job = document["paths"]["/v1/jobs/{jobid}"]["get"]["responses"]
    assert {"400", "401", "404"} <= set(job)
    token = document["paths"]["/v1/token"]["post"]["responses"]
    assert "400" in token


def test_a_short_secret_key_is_reported_once_in_words() -> None:
    program = textwrap.dedent(
        """
        from broker.rest.client import RestClient
        from broker.rest.tokens import encode_handshake
        for _ in range(3):
            RestClient("http://127.0.0.1:9", user="u", token="p", secret_key="short")
            encode_handshake("u", "p", "short")
        """
    )
    proc = subprocess.run([sys.executable, "-W", "default", "-c", program], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "InsecureKeyLengthWarning" not in proc.stderr
    assert proc.stderr.count("FLUX_SECRET_KEY is only 5 bytes") == 1, proc.stderr


def test_a_short_signing_key_is_refused(tmp_path) -> None:
    from broker.rest.settings import RestSettings, SettingsError

    with pytest.raises(SettingsError, match="FLUX_TOKEN_SIGNING_KEY is 5 bytes"):
        RestSettings.from_env(tmp_path, {"FLUX_TOKEN_SIGNING_KEY": "short"})


DEEP = "body: JSON nested deeper than 64 levels (arrays and objects)"


@pytest.mark.parametrize("depth", [64, 1000, 100_000])  # inside the body's object: 65 levels and more
def test_a_deeply_nested_json_body_is_400_on_every_route_that_reads_json(server: Server, depth: int) -> None:
    """Before: 500 (RecursionError in Starlette's json.loads) from 1,000 levels, on submit and the users API."""
    headers = {**_bearer(server), "content-type": "application/json"}
    nested = "[" * depth + "]" * depth
    bodies = {
        "/v1/jobs/submit": '{"command": "true", "envars": ' + nested + "}",
        "/v1/users": '{"name": "deep", "password": ' + nested + "}",
    }
    for path, body in bodies.items():
        for content in (body.encode(), iter([body[:7].encode(), body[7:].encode()])):  # sized, then chunked
            reply = httpx.post(f"{server.url}{path}", content=content, headers=headers, timeout=30)
            assert reply.status_code == 400, (path, reply.text[:300])
            assert reply.json() == {"Message": "Invalid request body", "Errors": [DEEP]}
    shallow = '{"command": "true", "envars": ' + "[" * 63 + "]" * 63 + "}"  # 64 levels, the limit: the route answers
    reply = httpx.post(f"{server.url}/v1/jobs/submit", content=shallow, headers=headers)
    assert reply.status_code == 400 and reply.json()["Errors"] == ["envars: expected k=v,k=v or an object"]
    assert httpx.post(f"{server.url}/v1/jobs/submit", json={"command": "true"}, headers=headers).status_code == 200


def test_the_public_client_sending_a_deep_body_gets_a_400_naming_it(server: Server) -> None:
    """flux-restful-client retries its submit with a JSON body after the 401 that asks it to log in."""
    script = """
        import sys
        sys.setrecursionlimit(20000)  # for the client's own json.dumps of 5,000 levels
        deep = {"command": "true", "envars": {"A": [[]]}}
        for _ in range(5000):
            deep["envars"]["A"] = [deep["envars"]["A"]]
        reply = cli.do_request("jobs/submit", "POST", data=deep)
        print(json.dumps([reply.status_code, reply.json()]))
    """
    proc = _public_client(server, SUPERUSER[1], script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [400, {"Message": "Invalid request body", "Errors": [DEEP]}]
