"""A slow call to the instance (or to the user database) never holds up an unrelated request.

The app runs behind a real uvicorn server (one event loop, as in production). One route's call is made to
block until the test lets it go; meanwhile a GET of another job must be answered. Were the slow call made on
the event loop, the GET would wait for it (issue 30: every request queued behind each submit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.client import FluxError
from broker.jobs.api import JobInfo
from broker.rest.app import create_app
from broker.rest.jobs import BrokerJobService, SubmitRequest
from broker.rest.per_thread import PerThread
from broker.rest.settings import RestSettings
from broker.rest.testing import serve_app
from broker.rest.users import UserStore
from broker.rest.web.testing import csrf_of

ADMIN = ("admin", "admin-password")
HELD = 20.0  # how long a slow call waits to be let go (the test lets it go long before)


class Gate:
    """Where a slow call waits: `entered` once the call is in progress, until `release`."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def hold(self) -> None:
        self.entered.set()
        if not self.release.wait(HELD):
            raise AssertionError("the test never let the slow call go")


class SlowService:
    """An in-memory job service; the method named `slow` blocks (as a busy instance would) until let go."""

    def __init__(self, slow: str, gate: Gate) -> None:
        self.slow, self.gate = slow, gate
        self.records: dict[int, JobInfo] = {}
        self.next_id = 100

    def _maybe_slow(self, name: str) -> None:
        if name == self.slow:
            self.gate.hold()

    def add(self, name: str) -> JobInfo:
        self.next_id += 1
        job = JobInfo(
            id=self.next_id, state="RUN", result="", returncode=None, nnodes=1, ntasks=1, nodelist="pod-0",
            runtime=0.0, name=name, userid=0, urgency=16, priority=16, t_submit=time.time(), t_run=time.time(),
            t_cleanup=0.0, t_inactive=0.0,
        )  # fmt: skip
        self.records[job.id] = job
        return job

    def submit(self, request: SubmitRequest, userid: int) -> int:
        self._maybe_slow("submit")
        return self.add(request.command[0]).id

    def jobs(self, limit: int = 1000, owners: bool = True) -> list[JobInfo]:
        self._maybe_slow("jobs")
        return sorted(self.records.values(), key=lambda j: -j.id)[:limit]

    def info(self, jobid: int) -> JobInfo:
        if jobid not in self.records:
            raise FluxError(2, f"unknown job {jobid}")
        return self.records[jobid]

    def cancel(self, jobid: int) -> None:
        self._maybe_slow("cancel")
        self.info(jobid)

    def output(self, jobid: int, offset: int = 0, wait: bool = False) -> tuple[list[str], int, bool]:
        self._maybe_slow("output")
        if wait:  # a long poll, as both real services make one: nothing new until the job writes
            self.gate.release.wait(HELD)
        return [], offset, False

    def nodes(self) -> list[str]:
        return ["pod-0"]

    def shutdown(self) -> None:
        pass

    def close(self) -> None:
        pass


def _form_session(url: str) -> tuple[httpx.Client, str]:
    """A browser-like client signed in through the form; returns it and its CSRF token."""
    browser = httpx.Client(base_url=url, timeout=30, follow_redirects=False)
    token = csrf_of(browser.get("/login").text)
    signed = browser.post("/login", data={"username": ADMIN[0], "password": ADMIN[1], "csrf_token": token})
    assert signed.status_code == 303, signed.text
    return browser, token


Send = Callable[[httpx.Client, httpx.Client, str, int], httpx.Response]
"""(API client, signed-in browser, its CSRF token, a job id) -> the slow request's answer."""


def _page_submit(api: httpx.Client, web: httpx.Client, csrf: str, job: int) -> httpx.Response:
    return web.post("/jobs/submit", data={"command": "sleep 1", "csrf_token": csrf})


def _page_cancel(api: httpx.Client, web: httpx.Client, csrf: str, job: int) -> httpx.Response:
    return web.post(f"/jobs/{job}/cancel", data={"csrf_token": csrf})


def _page_login(api: httpx.Client, web: httpx.Client, csrf: str, job: int) -> httpx.Response:
    return web.post("/login", data={"username": ADMIN[0], "password": ADMIN[1], "csrf_token": csrf})


def _add_user(api: httpx.Client, web: httpx.Client, csrf: str, job: int) -> httpx.Response:
    return api.post("/v1/users", json={"name": "carol", "password": "carol-pw"})


# route -> (the call made slow, the request that makes it)
ROUTES: dict[str, tuple[str, Send]] = {
    "API submit": ("submit", lambda api, web, csrf, job: api.post("/v1/jobs/submit", json={"command": "sleep 1"})),
    "API cancel": ("cancel", lambda api, web, csrf, job: api.post(f"/v1/jobs/{job}/cancel")),
    "API listing": ("jobs", lambda api, web, csrf, job: api.get("/v1/jobs", params={"details": "true"})),
    "API output": ("output", lambda api, web, csrf, job: api.get(f"/v1/jobs/{job}/output")),
    "API add user": ("users.add", _add_user),
    "page submit": ("submit", _page_submit),
    "page cancel": ("cancel", _page_cancel),
    "page listing": ("jobs", lambda api, web, csrf, job: web.get("/jobs")),
    "page login": ("users.authenticate", _page_login),
}


@pytest.fixture
def gate() -> Iterator[Gate]:
    held = Gate()
    yield held
    held.release.set()


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_slow_call_does_not_delay_an_unrelated_get(route: str, gate: Gate, tmp_path: Path) -> None:
    slow, send = ROUTES[route]
    service = SlowService(slow, gate)
    users = UserStore(tmp_path / "users.db", rounds=4)
    settings = RestSettings(
        state_dir=tmp_path, token_signing_key="k" * 40, superuser=ADMIN[0], superuser_password=ADMIN[1]
    )
    app = create_app(settings, service, users)
    target, other = service.add("target"), service.add("other")
    with serve_app(app) as url:
        token = httpx.post(f"{url}/v1/token", auth=ADMIN, timeout=30).json()["access_token"]
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=HELD + 10)
        web, csrf = _form_session(url)
        if slow.startswith("users."):  # the user database's call is the slow one (bcrypt, in real life)
            method = getattr(users, slow.removeprefix("users."))

            def held(*args: Any, **kwargs: Any) -> Any:
                gate.hold()
                return method(*args, **kwargs)

            setattr(users, slow.removeprefix("users."), held)
        answers: list[httpx.Response] = []
        slow_request = threading.Thread(target=lambda: answers.append(send(api, web, csrf, target.id)))
        slow_request.start()
        assert gate.entered.wait(10), f"{route}: the slow call was never made"

        # the gate holds the slow call until the GET is answered (or HELD passes): a GET queued behind it would
        # find it over
        unrelated = api.get(f"/v1/jobs/{other.id}", timeout=HELD + 10)
        assert unrelated.status_code == 200 and unrelated.json()["id"] == other.id
        assert slow_request.is_alive() and not answers, f"{route}: an unrelated GET waited for the slow call"

        gate.release.set()
        slow_request.join(timeout=30)
        assert answers and answers[0].status_code < 500, (route, answers and answers[0].text)
        api.close()
        web.close()


def test_streams_hold_no_worker_thread_while_their_job_is_quiet(gate: Gate, tmp_path: Path) -> None:
    """More open output streams than the worker pool has threads, and the server still answers."""
    service = SlowService("", gate)
    settings = RestSettings(state_dir=tmp_path, token_signing_key="k" * 40, require_auth=False)
    app = create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4))
    quiet = service.add("quiet")
    with serve_app(app) as url:
        streams = [httpx.Client(base_url=url, timeout=30) for _ in range(48)]  # anyio's pool: 40 threads
        opened = []
        try:
            for client in streams:
                response = client.send(client.build_request("GET", f"/v1/jobs/{quiet.id}/output/stream"), stream=True)
                assert response.status_code == 200
                opened.append(response)
            # quiet streams never end: a server whose threads they all held would never answer this
            answer = httpx.get(f"{url}/v1/jobs/{quiet.id}", timeout=30)
            assert answer.status_code == 200
        finally:
            for response in opened:
                response.close()
            for client in streams:
                client.close()


def test_a_thread_s_connection_is_closed_when_the_thread_ends() -> None:
    """The worker pool retires idle threads; their handles must not stay open (nor be kept for ever)."""
    closed: list[object] = []
    handles: PerThread[object] = PerThread(object, closed.append)
    made: list[object] = []
    worker = threading.Thread(target=lambda: made.append(handles.get()))
    worker.start()
    worker.join()
    assert made and closed == made and handles.live() == 0
    mine = handles.get()
    assert handles.get() is mine and handles.live() == 1  # one per thread, made once
    handles.close()
    assert closed == [*made, mine]


def test_the_builtin_service_closes_a_retired_thread_s_client(tmp_path: Path) -> None:
    socket = tmp_path / "local-0"
    socket.touch()  # Handle checks the path exists; ZeroMQ connects lazily
    service = BrokerJobService(f"local://{socket}")
    clients = []
    worker = threading.Thread(target=lambda: clients.append(service.client))
    worker.start()
    worker.join()
    assert clients and clients[0].handle._sock.closed  # type: ignore[attr-defined]
    service.close()


class HoldingBroker:
    """A stand-in for the built-in broker on a real ZeroMQ ROUTER socket (the protocol the REST server speaks):
    `job-manager.submit` is answered only once the test lets it go (a broker slow to acknowledge: a long
    fsync, a busy loop), `job-manager.info` at once. Whatever path the REST server takes to the broker, on
    the event loop or in a thread, the delay is where a real one would be."""

    def __init__(self, path: Path, gate: Gate) -> None:
        import zmq

        self.gate = gate
        self.uri = f"local://{path}"
        path.touch()  # the blocking client checks the path exists; ZeroMQ binds over it
        self.socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.bind(f"ipc://{path}")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="holding-broker", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import zmq

        from broker.protocol import Message

        held: list[tuple[bytes, Message]] = []
        while not self.stop.is_set():
            if held and self.gate.release.is_set():
                for ident, msg in held:
                    self.socket.send_multipart([ident, msg.response({"id": 4242}).encode()])
                held.clear()
            if not self.socket.poll(20):
                continue
            ident, frame = self.socket.recv_multipart(zmq.NOBLOCK)
            msg = Message.decode(frame)
            if msg.topic == "job-manager.submit":
                self.gate.entered.set()
                held.append((ident, msg))
            elif msg.topic == "job-manager.info":
                job = {"id": msg.payload["id"], "state": "RUN", "name": "other", "ntasks": 1, "nnodes": 1}
                self.socket.send_multipart([ident, msg.response(job).encode()])
            else:
                self.socket.send_multipart([ident, msg.error(38, f"{msg.topic}: not in this stand-in").encode()])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.socket.close(0)


def test_a_submit_held_at_the_builtin_broker_does_not_delay_a_get(gate: Gate, tmp_path: Path) -> None:
    """The built-in flavour (BrokerJobService, as `flux restful serve` makes it): its broker takes its time to
    acknowledge a submit; a GET of another job, sent meanwhile, is answered at once."""
    broker = HoldingBroker(tmp_path / "local-0", gate)
    service = BrokerJobService(broker.uri)
    settings = RestSettings(
        state_dir=tmp_path, token_signing_key="k" * 40, superuser=ADMIN[0], superuser_password=ADMIN[1]
    )
    app = create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4))
    try:
        with serve_app(app) as url:
            token = httpx.post(f"{url}/v1/token", auth=ADMIN, timeout=30).json()["access_token"]
            api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=HELD + 10)
            answers: list[httpx.Response] = []
            slow = threading.Thread(target=lambda: answers.append(api.post("/v1/jobs/submit", json={"command": "x"})))
            slow.start()
            assert gate.entered.wait(10), "the submit never reached the broker"
            unrelated = api.get("/v1/jobs/77", timeout=HELD + 10)  # held until answered: order, not seconds
            assert unrelated.status_code == 200 and unrelated.json()["id"] == 77
            assert slow.is_alive() and not answers, "a GET waited for a submit held at the broker"
            gate.release.set()
            slow.join(timeout=30)
            assert answers and answers[0].status_code == 200 and answers[0].json()["id"] == 4242, answers
            api.close()
    finally:
        service.close()
        broker.close()


WORK = 0.1  # seconds of a submit's work on the event loop, without a pause (parsing, the jobspec, encoding)


class BusySubmits:
    """The event-loop side of a service (`asynchronous`, as the built-in flavour's): each submit works WORK
    seconds on the loop without a pause, as a real submit's CPU work does; reads answer at once."""

    def __init__(self, service: SlowService) -> None:
        self.service = service
        self.started = threading.Event()
        self.done = 0  # submits whose work is over
        self.done_at_read: list[int] = []  # `done` when each read was served

    async def submit(self, request: SubmitRequest, userid: int) -> int:
        self.started.set()
        end = time.perf_counter() + WORK
        while time.perf_counter() < end:
            pass
        self.done += 1
        return self.service.add(request.command[0]).id

    async def jobs(self, limit: int = 1000, owners: bool = True) -> list[JobInfo]:
        return self.service.jobs(limit, owners)

    async def info(self, jobid: int) -> JobInfo:
        self.done_at_read.append(self.done)
        return self.service.info(jobid)


def test_a_get_waits_for_at_most_one_submit_s_work_not_for_every_submit_that_arrived(
    gate: Gate, tmp_path: Path
) -> None:
    """Four submits arrive together, then a GET: the GET is answered after the submit already working, before
    the other three (broker/rest/reads_first.py: submits take turns, and a request that arrived starts first).
    Submits that ran back to back in one pass of the loop kept the GET waiting for all four."""
    service = SlowService("", gate)
    busy = BusySubmits(service)
    service.asynchronous = busy  # type: ignore[attr-defined]
    settings = RestSettings(state_dir=tmp_path, token_signing_key="k" * 40, require_auth=False)
    app = create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4))
    other = service.add("other")
    with serve_app(app) as url:
        clients = [httpx.Client(base_url=url, timeout=30) for _ in range(5)]
        for client in clients:
            assert client.get(f"/v1/jobs/{other.id}").status_code == 200  # connections open before the race
        answers: list[httpx.Response] = []
        submits = [
            threading.Thread(target=lambda c=c: answers.append(c.post("/v1/jobs/submit", json={"command": "x"})))
            for c in clients[:4]
        ]
        for thread in submits:
            thread.start()
        assert busy.started.wait(10), "no submit reached the service"
        time.sleep(WORK / 2)  # sleep: the other three arrive while the first works (the loop, busy, shows nothing)
        unrelated = clients[4].get(f"/v1/jobs/{other.id}")
        for thread in submits:
            thread.join(timeout=30)
        assert unrelated.status_code == 200 and unrelated.json()["id"] == other.id
        assert len(answers) == 4 and all(a.status_code == 200 for a in answers), [a.text for a in answers]
        # served once the working submit ended (or the next, had the GET come late): not after all four
        assert busy.done_at_read[-1] <= 2, f"a GET was served after {busy.done_at_read[-1]} of 4 submits"
        for client in clients:
            client.close()
