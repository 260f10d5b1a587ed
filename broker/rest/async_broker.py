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
import itertools
from typing import Any

import zmq
import zmq.asyncio

from broker.client import DEFAULT_TIMEOUT, uri_to_endpoint
from broker.errors import FluxError
from broker.jobs.api import JobInfo
from broker.jobs.states import ACTIVE, JobState
from broker.protocol import NODEID_ANY, REQUEST, RESPONSE, Message, ProtocolError

ETIMEDOUT = 110
ECONNRESET = 104


class AsyncHandle:
    """RPCs to one broker from one asyncio loop; a reader task hands each response to the request it answers."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._endpoint = uri_to_endpoint(uri)
        self._sock: zmq.asyncio.Socket | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._tags = itertools.count(1)

    def _socket(self) -> zmq.asyncio.Socket:
        if self._sock is None:
            context = zmq.asyncio.Context(zmq.Context.instance())  # shares the process's I/O thread
            self._sock = context.socket(zmq.DEALER)
            self._sock.setsockopt(zmq.LINGER, 0)
            self._sock.connect(self._endpoint)
            self._reader = asyncio.get_running_loop().create_task(self._read())
        return self._sock

    async def _read(self) -> None:
        assert self._sock is not None
        try:
            while True:
                frame = await self._sock.recv()
                try:
                    msg = Message.decode(frame)
                except ProtocolError:
                    continue
                waiter = self._pending.pop(msg.matchtag, None) if msg.type == RESPONSE else None
                if waiter is not None and not waiter.done():
                    waiter.set_result(msg)
        except (asyncio.CancelledError, zmq.ZMQError) as exc:
            for waiter in self._pending.values():
                if not waiter.done():
                    waiter.set_exception(FluxError(ECONNRESET, f"connection to {self.uri} closed"))
            self._pending.clear()
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def rpc(
        self, topic: str, payload: dict[str, Any] | None = None, timeout: float | None = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        """The response's payload; FluxError on an error response or after `timeout` seconds."""
        sock = self._socket()
        tag = next(self._tags)
        waiter: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[tag] = waiter
        try:
            await sock.send(Message(REQUEST, topic, payload or {}, nodeid=NODEID_ANY, matchtag=tag).encode())
            msg = await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            raise FluxError(ETIMEDOUT, f"timed out after {timeout}s waiting for a response from {self.uri}") from None
        finally:
            self._pending.pop(tag, None)
        if msg.errnum:
            raise FluxError(msg.errnum, msg.errstr or f"error {msg.errnum}")
        return msg.payload

    def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._sock is not None:
            self._sock.close(0)
        self._sock, self._reader = None, None


class AsyncBrokerJobs:
    """What the hot routes need from the built-in broker, awaited on the loop (see the module docstring).

    The payloads and their decoding are JobClient's (broker/jobs/api.py), so both paths say the same."""

    def __init__(self, uri: str) -> None:
        self.handle = AsyncHandle(uri)

    async def info(self, jobid: int) -> JobInfo:
        return JobInfo.from_dict(await self.handle.rpc("job-manager.info", {"id": jobid}))

    async def jobs(self, limit: int, owners: bool = True) -> list[JobInfo]:
        """Every job, newest first, at most `limit` (owners come with each job here, at no cost)."""
        payload = {"states": int(ACTIVE | JobState.INACTIVE), "max_entries": limit}
        reply = await self.handle.rpc("job-manager.list", payload)
        return [JobInfo.from_dict(j) for j in reply["jobs"]]

    async def submit_jobspec(self, jobspec: dict[str, Any], userid: int, urgency: int = 16) -> int:
        reply = await self.handle.rpc("job-manager.submit", {"jobspec": jobspec, "urgency": urgency, "userid": userid})
        return int(reply["id"])

    def close(self) -> None:
        self.handle.close()
