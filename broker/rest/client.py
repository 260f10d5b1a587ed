"""A Python client for the REST API (ours or flux-restful-api): the 401 → /v1/token → Bearer dance included."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, TypedDict, cast
from urllib.parse import quote

import httpx

from broker.errors import BrokerFailure
from broker.jobs.shapes import JobListRecord
from broker.rest.tokens import encode_handshake, short_key_warning


class UserEntry(TypedDict):
    name: str
    superuser: bool


class UserAdded(UserEntry):
    """POST /v1/users (broker/rest/users_api.py: UserAdded)."""

    Message: str
    mode: str


class UserList(TypedDict):
    """GET /v1/users."""

    users: list[UserEntry]
    mode: str


class UserChanged(TypedDict):
    """DELETE /v1/users/{name} and PUT /v1/users/{name}/password."""

    Message: str
    name: str


class RestError(BrokerFailure):
    """An error answer from the server (status and its message) or an unreachable server."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(body, dict):
        detail = body.get("detail") or body.get("Message") or body
        errors = body.get("Errors")
        if errors:
            return f"{detail}: {'; '.join(map(str, errors))}"
        if isinstance(detail, list):  # FastAPI validation errors
            return "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" for d in detail)
        return str(detail)
    return str(body)


class RestClient:
    """user/token default to $FLUX_USER/$FLUX_TOKEN; secret_key ($FLUX_SECRET_KEY) enables the JWT handshake."""

    def __init__(
        self,
        url: str,
        user: str | None = None,
        token: str | None = None,
        secret_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.user = user if user is not None else os.environ.get("FLUX_USER", "")
        self.token = token if token is not None else os.environ.get("FLUX_TOKEN", "")
        self.secret_key = secret_key if secret_key is not None else os.environ.get("FLUX_SECRET_KEY", "")
        short_key_warning("FLUX_SECRET_KEY", self.secret_key)
        self.access_token = ""
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_token}"} if self.access_token else {}

    def login(self) -> str:
        """Exchange credentials for an access token at /v1/token."""
        if not self.user or not self.token:
            raise RestError(401, "the server needs credentials: set FLUX_USER and FLUX_TOKEN (or --user/--token)")
        if self.secret_key:
            headers = {"Authorization": f"Bearer {encode_handshake(self.user, self.token, self.secret_key)}"}
            response = self._http.post("/v1/token", headers=headers)
        else:
            response = self._http.post("/v1/token", auth=(self.user, self.token))
        if response.status_code != 200:
            raise RestError(response.status_code, _message(response))
        self.access_token = str(response.json()["access_token"])
        return self.access_token

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, headers=self._headers(), **kwargs)
            if response.status_code == 401 and "www-authenticate" in response.headers:
                self.login()
                response = self._http.request(method, path, headers=self._headers(), **kwargs)
        except httpx.TransportError as exc:
            raise RestError(0, f"cannot reach {self.url}: {exc}") from exc
        if response.status_code >= 400:
            raise RestError(response.status_code, _message(response))
        return response

    # ------------------------------------------------------------------ endpoints
    def submit(self, command: str | list[str], **params: Any) -> int:
        """Parameters go in the query string, as the upstream Python client sends them."""
        text = command if isinstance(command, str) else " ".join(command)
        query = {"command": text}
        for key, value in params.items():
            if value is None:
                continue
            if isinstance(value, dict):
                value = ",".join(f"{k}={v}" for k, v in value.items())
            query[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return int(self.request("POST", "/v1/jobs/submit", params=query).json()["id"])

    def jobs(self, detail: bool = True) -> list[JobListRecord]:
        body = self.request("GET", "/v1/jobs", params={"detail": detail, "listing": True}).json()
        return cast(list[JobListRecord], list(body["jobs"] if isinstance(body, dict) and "jobs" in body else body))

    def job(self, jobid: int | str) -> JobListRecord:
        return cast(JobListRecord, self.request("GET", f"/v1/jobs/{jobid}").json())

    def output(self, jobid: int | str) -> list[str]:
        return list(self.request("GET", f"/v1/jobs/{jobid}/output").json().get("Output", []))

    def stream(self, jobid: int | str) -> Iterator[str]:
        """Lines as the job writes them, until it ends."""
        for attempt in range(2):
            with self._http.stream("GET", f"/v1/jobs/{jobid}/output/stream", headers=self._headers()) as response:
                if response.status_code == 401 and attempt == 0:
                    self.login()
                    continue
                if response.status_code >= 400:
                    response.read()
                    raise RestError(response.status_code, _message(response))
                yield from response.iter_lines()
                return

    def cancel(self, jobid: int | str) -> str:
        return str(self.request("POST", f"/v1/jobs/{jobid}/cancel").json().get("Message", ""))

    def nodes(self) -> list[str]:
        return list(self.request("GET", "/v1/nodes").json()["nodes"])

    def stop_service(self) -> str:
        return str(self.request("POST", "/v1/service/stop").json().get("Message", ""))

    # ------------------------------------------------------------------ users (superuser only)
    def add_user(self, name: str, password: str, superuser: bool = False) -> UserAdded:
        """The password goes in the JSON body only (never the URL)."""
        body = {"name": name, "password": password, "superuser": superuser}
        return cast(UserAdded, self.request("POST", "/v1/users", json=body).json())

    def users(self) -> UserList:
        """{"users": [{"name", "superuser"}...], "mode": the server's mode}."""
        return cast(UserList, self.request("GET", "/v1/users").json())

    def remove_user(self, name: str) -> UserChanged:
        return cast(UserChanged, self.request("DELETE", f"/v1/users/{quote(name, safe='')}").json())

    def set_password(self, name: str, password: str) -> UserChanged:
        """Your own password, or anyone's as a superuser; tokens issued before (yours too) stop working."""
        path = f"/v1/users/{quote(name, safe='')}/password"
        return cast(UserChanged, self.request("PUT", path, json={"password": password}).json())
