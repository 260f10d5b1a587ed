"""The built-in broker's job calls made on the REST server's event loop, with no worker thread in between.

Why: a request that goes to a worker thread and back crosses the interpreter lock twice more, and while other
requests' work (submits: validation, jobspec, JSON) holds the lock in other threads, each crossing waits its
turn. Measured (bench/bench_rest.py), that is what made a GET several times slower during concurrent submits
(issue 30), not the broker. Our broker speaks ZeroMQ, which asyncio can wait on, so the hot routes (one job,
the listing, submit) await their RPC on the loop: one thread, no lock hand-offs, and a slow broker answer
still holds up nothing (the loop serves other requests while it waits).

One DEALER socket per event loop, shared by every request on it (they are told apart by matchtag), as the
broker's own clients are: nothing here is touched from another thread.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import zmq

from broker.client import DEFAULT_TIMEOUT, uri_to_endpoint
from broker.jobs.api import JobInfo
from broker.jobs.states import ACTIVE, JobState
from broker.rest.local_handle import LocalAsyncHandle, PendingRequests
from broker.rest.topics import JOB_INFO, JOB_LIST, JOB_SUBMIT, Answer, JobListRequest, Request, Topic

if TYPE_CHECKING:
    from broker.jobs.shapes import Jobspec

SEND_RETRY_SECONDS = 0.005


class AsyncHandle:
    """RPCs to one broker from one asyncio loop: a reader callback on the socket's file descriptor hands each
    response to the request it answers.

    A plain (not zmq.asyncio) socket with the loop watching its ZMQ_FD, once, for the socket's lifetime: a
    request is one non-blocking send, a timer and a future; zmq.asyncio made a watcher, futures and a
    poll-state update per send and per receive, which measured 0.39 ms of the loop's time per round trip here,
    more than a third of a whole GET (bench/bench_rest.py). ZMQ_FD is edge-triggered ("look at the socket"),
    so the reader receives until there is nothing left, and a send (which may take the socket's signal while
    it sends) is followed by a look of its own."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._endpoint = uri_to_endpoint(uri)
        self._sock: zmq.Socket[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requests = PendingRequests(uri)
        self._look_scheduled = False
        self._fd = -1

    def _socket(self) -> zmq.Socket[bytes]:
        if self._sock is None:
            sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)  # the process's one I/O thread
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self._endpoint)
            self._loop = asyncio.get_running_loop()
            self._fd = int(sock.getsockopt(zmq.FD))
            self._loop.add_reader(self._fd, self._drain)
            self._sock = sock
        return self._sock

    def _drain(self) -> None:
        """Every message ready, each to its waiter (the reader callback, and the look after a send)."""
        self._look_scheduled = False
        sock = self._sock
        if sock is None:
            return
        try:
            # ZMQ_EVENTS says whether a message is there (and re-arms the descriptor): asking costs a
            # microsecond, where a recv that finds nothing raises zmq.Again, about 15 us to build, twice a request
            while int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
                try:
                    frame = sock.recv(zmq.NOBLOCK)
                except zmq.Again:
                    return
                self._requests.deliver(frame)
        except zmq.ZMQError:
            self._requests.fail_all()

    def _look_soon(self) -> None:
        if not self._look_scheduled and self._loop is not None:
            self._look_scheduled = True
            self._loop.call_soon(self._drain)

    async def _send(self, sock: zmq.Socket[bytes], frame: bytes, deadline: float) -> None:
        """Send without blocking the loop; while the socket's queue is full (the broker far behind), wait."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock.send(frame, zmq.NOBLOCK)
                return
            except zmq.Again:
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(SEND_RETRY_SECONDS)

    async def rpc(
        self, topic: Topic[Answer], payload: Request | None = None, timeout: float | None = DEFAULT_TIMEOUT
    ) -> Answer:
        """The response's payload; FluxError on an error response or after `timeout` seconds."""
        sock = self._socket()

        async def send(data: bytes, deadline: float) -> None:
            try:
                await self._send(sock, data, deadline)
            except zmq.Again:
                raise TimeoutError from None
            except zmq.ZMQError as exc:
                raise ConnectionError(str(exc)) from None
            self._look_soon()

        return await self._requests.call(topic, payload, timeout, send)

    def close(self) -> None:
        if self._sock is not None:
            open_loop = self._loop is not None and not self._loop.is_closed()
            if self._loop is not None and open_loop:
                self._loop.remove_reader(self._fd)
            self._sock.close(0)
            if open_loop:
                self._requests.fail_all()
            else:
                self._requests.forget_all()
        self._sock, self._loop = None, None


def async_handle(uri: str) -> AsyncHandle | LocalAsyncHandle:
    """The broker's local socket spoken by the loop itself (broker/rest/local_handle.py), tcp:// through pyzmq."""
    if uri.startswith(("local://", "ipc://")):
        return LocalAsyncHandle(uri)
    return AsyncHandle(uri)


class AsyncBrokerJobs:
    """What the hot routes need from the built-in broker, awaited on the loop (see the module docstring).

    The payloads and their decoding are JobClient's (broker/jobs/api.py), so both paths say the same."""

    def __init__(self, uri: str) -> None:
        self.handle = async_handle(uri)

    async def info(self, jobid: int) -> JobInfo:
        record = await self.handle.rpc(JOB_INFO, {"id": jobid})
        return JobInfo.from_dict(record)

    async def jobs(self, limit: int, owners: bool = True) -> list[JobInfo]:
        """Every job, newest first, at most `limit` (owners come with each job here, at no cost)."""
        payload: JobListRequest = {"states": int(ACTIVE | JobState.INACTIVE), "max_entries": limit}
        reply = await self.handle.rpc(JOB_LIST, payload)
        return [JobInfo.from_dict(j) for j in reply["jobs"]]

    async def submit_jobspec(self, jobspec: Jobspec, userid: int, urgency: int = 16) -> int:
        reply = await self.handle.rpc(JOB_SUBMIT, {"jobspec": jobspec, "urgency": urgency, "userid": userid})
        return int(reply["id"])

    def close(self) -> None:
        self.handle.close()
