"""RPCs to the lead broker's local socket spoken by the REST server's event loop itself, without ZeroMQ.

Why: with pyzmq every request and every answer crosses the process's ZeroMQ I/O thread, and each crossing is a
thread wake-up: on this 2-core VM that was a third of the server's CPU for a GET of one job, and more under load.
The broker's local socket is a Unix socket speaking ZMTP (broker/zmtp.py), so asyncio can write a request there
and read the answer itself: one write, one read, no other thread. Same interface as async_broker.AsyncHandle,
which still serves tcp:// URIs.

A broker not (yet) listening is retried every RECONNECT_SECONDS until the request's deadline, as ZeroMQ would
have; a connection lost fails the requests waiting on it at once (with ZeroMQ they waited for their timeout),
and the next request connects again.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, cast

from broker.client import DEFAULT_TIMEOUT
from broker.errors import FluxError
from broker.protocol import NODEID_ANY, REQUEST, RESPONSE, Message, ProtocolError
from broker.rest.topics import Answer, Request, Topic
from broker.zmtp import COMMAND, DISCONNECT, FrameError, FrameReader, dealer_hello, frame

ETIMEDOUT = 110
ECONNRESET = 104
EPROTO = 71
RECONNECT_SECONDS = 0.1


class PendingRequests:
    """The requests in flight on one connection, told apart by matchtag: what both event-loop clients share
    (this module's and async_broker.AsyncHandle). A `send` that raises ConnectionError fails the request with
    ECONNRESET, TimeoutError with ETIMEDOUT."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._waiters: dict[int, asyncio.Future[Message]] = {}
        self._tags = itertools.count(1)

    def deliver(self, body: bytes) -> None:
        """A message from the broker: a response goes to its request's waiter; anything else is dropped."""
        try:
            msg = Message.decode(body)
        except ProtocolError:
            return
        waiter = self._waiters.pop(msg.matchtag, None) if msg.type == RESPONSE else None
        if waiter is not None and not waiter.done():
            waiter.set_result(msg)

    def fail_all(self) -> None:
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(FluxError(ECONNRESET, f"connection to {self.uri} closed"))
        self._waiters.clear()

    def forget_all(self) -> None:
        """After the loop has closed: a waiter's callbacks would run on it, so there is no one left to fail."""
        self._waiters.clear()

    async def call(
        self,
        topic: Topic[Answer],
        payload: Request | None,
        timeout: float | None,
        send: Callable[[bytes, float], Awaitable[None]],
    ) -> Answer:
        """The response's payload, in the shape of the topic's answer; FluxError on an error response, a lost
        connection or after `timeout` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (DEFAULT_TIMEOUT if timeout is None else timeout)
        tag = next(self._tags)
        waiter: asyncio.Future[Message] = loop.create_future()
        self._waiters[tag] = waiter
        expiry = None if timeout is None else loop.call_at(deadline, expire_waiter, waiter)
        try:
            body = dict(payload) if payload else {}
            await send(Message(REQUEST, topic.name, body, nodeid=NODEID_ANY, matchtag=tag).encode(), deadline)
            msg = await waiter
        except TimeoutError:
            raise FluxError(ETIMEDOUT, f"timed out after {timeout}s waiting for a response from {self.uri}") from None
        except ConnectionError as exc:
            raise FluxError(ECONNRESET, f"connection to {self.uri} failed: {exc}") from None
        finally:
            self._waiters.pop(tag, None)
            if expiry is not None:
                expiry.cancel()
            if not waiter.done():
                waiter.cancel()  # the send failed first: nobody will await this waiter
            elif not waiter.cancelled():
                waiter.exception()  # read, so an expiry that raced a failed send is not logged as unretrieved
        if msg.errnum:
            raise FluxError(msg.errnum, msg.errstr or f"error {msg.errnum}")
        return cast(Answer, msg.payload)  # where the answer enters: its shape is the topic's


class _Dealer(asyncio.Protocol):
    """One connection: hands each message to `deliver`; `ready` once the broker's READY came."""

    def __init__(self, deliver: Any, lost: Any) -> None:
        self._deliver = deliver
        self._lost = lost
        self._reader = FrameReader()
        self._broken: FrameError | None = None
        self.transport: asyncio.Transport | None = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writable = asyncio.Event()
        self._writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(dealer_hello())

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._reader.feed(data)
        except FrameError as exc:  # not a broker we can talk to: hang up, which fails the requests waiting here
            self._broken = exc
            if self.transport is not None:
                self.transport.abort()
            return
        for flags, body in frames:
            if flags & COMMAND:  # the broker's READY (ZMTP 3.0 has no other command for us)
                if not self.ready.done():
                    self.ready.set_result(None)
                continue
            self._deliver(body)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._writable.set()
        if not self.ready.done():
            self.ready.set_exception(self._broken or ConnectionResetError("closed during the greeting"))
        self._lost(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def send(self, data: bytes) -> None:
        """Write, waiting while the broker is far behind (the transport's buffer above its high-water mark)."""
        await self._writable.wait()
        if self.transport is None:
            raise ConnectionResetError("the connection to the broker was lost")
        self.transport.write(data)


class LocalAsyncHandle:
    """RPCs over one connection per event loop, told apart by matchtag; not for use from other threads."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._path = uri.removeprefix("local://").removeprefix("ipc://")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dealer: _Dealer | None = None
        self._connecting: asyncio.Future[_Dealer] | None = None
        self._requests = PendingRequests(uri)

    async def _connected(self, deadline: float) -> _Dealer:
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            self._dealer, self._connecting = None, None  # a new loop (asyncio.run again): the old one's is gone
        if self._dealer is not None and self._dealer.transport is not None:
            return self._dealer
        if self._connecting is None:  # one connection attempt, shared by the requests that arrive meanwhile
            self._connecting = asyncio.ensure_future(self._connect(deadline))
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done():
                self._connecting = None

    async def _connect(self, deadline: float) -> _Dealer:
        loop = asyncio.get_running_loop()
        self._loop = loop
        while True:
            try:
                _, dealer = await loop.create_unix_connection(self._new_dealer, self._path)
                await asyncio.wait_for(dealer.ready, max(0.0, deadline - loop.time()))
                self._dealer = dealer
                return dealer
            except FrameError as exc:  # something else listens there: waiting will not change it
                raise FluxError(EPROTO, f"cannot talk to {self.uri}: {exc}") from None
            except (OSError, TimeoutError) as exc:
                if loop.time() + RECONNECT_SECONDS >= deadline:
                    raise FluxError(ETIMEDOUT, f"cannot connect to {self.uri}: {exc}") from None
                await asyncio.sleep(RECONNECT_SECONDS)

    def _new_dealer(self) -> _Dealer:
        return _Dealer(self._requests.deliver, self._lost)

    def _lost(self, dealer: _Dealer) -> None:
        if dealer is self._dealer:
            self._dealer = None
        self._requests.fail_all()

    async def rpc(
        self, topic: Topic[Answer], payload: Request | None = None, timeout: float | None = DEFAULT_TIMEOUT
    ) -> Answer:
        """The response's payload; FluxError on an error response, a lost connection or after `timeout` s."""

        async def send(data: bytes, deadline: float) -> None:
            await (await self._connected(deadline)).send(frame(data))

        return await self._requests.call(topic, payload, timeout, send)

    def close(self) -> None:
        """Tell the broker and hang up; safe after the loop has closed (then there is nothing left to do)."""
        dealer, loop = self._dealer, self._loop
        self._dealer = None
        if dealer is None or loop is None or loop.is_closed():
            self._requests.forget_all()
            return

        def hang_up() -> None:
            if dealer.transport is not None:
                dealer.transport.write(frame(DISCONNECT))
                dealer.transport.close()
            self._requests.fail_all()

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            hang_up()
        else:
            loop.call_soon_threadsafe(hang_up)


def expire_waiter(waiter: asyncio.Future[Message]) -> None:
    """A request's timer: its waiter raises TimeoutError unless answered meanwhile."""
    if not waiter.done():
        waiter.set_exception(TimeoutError())
