"""flux-core RPCs awaited on the REST server's event loop (the flux flavour's hot reads), no worker thread.

Why: a read sent to a worker thread crosses the interpreter lock twice more, and during concurrent submits
(their jobspecs built in other threads) each crossing waits its turn: measured, that hand-off grew from 0.35 to
0.9 ms per GET, enough to double its latency (issue 30). flux-core's handle can be driven without its reactor:
`flux_pollfd(3)` gives a descriptor asyncio can watch, and requests are plain messages told apart by matchtag.

The calls are flux-core's public C API through the bindings' cffi module (`flux.core.inner.lib`), as
flux-python's own RPC class makes them (src/bindings/python/flux/rpc.py, core/handle.py):

    flux_matchtag_alloc / flux_matchtag_free    a tag per request (a late response's tag is freed on arrival)
    flux_request_encode + flux_msg_set_matchtag the request; flux_send(FLUX_O_NONBLOCK) sends it
    flux_pollfd / flux_pollevents               an edge-triggered descriptor: on each wake-up, pollevents, then
                                                flux_recv(FLUX_O_NONBLOCK) until EWOULDBLOCK
    flux_msg_get_errnum / flux_response_decode_error / flux_msg_get_string    the answer or its error

The handle is opened by the loop and used by it alone (a flux.Flux handle is not thread-safe).
"""

from __future__ import annotations

import asyncio
import errno
import importlib
import json
import os
from typing import Any, Protocol, cast

from broker.client import DEFAULT_TIMEOUT
from broker.errors import FluxError
from broker.jobs.api import JobInfo
from broker.jobs.info import job_owner
from broker.rest.flux_records import job_info_from_list
from broker.rest.jobs import JOB_LIST_LIMIT, InThreads, JobService, SubmitRequest
from broker.rest.topics import LIST_ID, LOOKUP, Answer, Request, Topic

SEND_RETRY_SECONDS = 0.005


class AsyncFluxHandle:
    """RPCs to one flux-core instance from one asyncio loop, over a handle only that loop touches."""

    def __init__(self, flux: Any, uri: str | None) -> None:
        inner = importlib.import_module("flux.core.inner")  # the bindings' cffi module: wherever `flux` imports
        self._flux, self._ffi, self._lib = flux, inner.ffi, inner.lib
        ffi, lib = self._ffi, self._lib
        self.uri = uri
        self._handle: Any = None  # the flux.Flux object (keeps the C handle alive)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._pending: dict[int, asyncio.Future[tuple[int, str, Any]]] = {}
        self._orphaned: set[int] = set()  # tags of requests that timed out: freed when their answer comes
        self._look_scheduled = False
        match = ffi.new("struct flux_match *")
        match.typemask = lib.FLUX_MSGTYPE_ANY
        match.matchtag = lib.FLUX_MATCHTAG_NONE
        match.topic_glob = ffi.NULL
        self._match = match

    def _open(self) -> Any:
        if self._handle is not None and self._loop is not asyncio.get_running_loop():
            self.close()  # another loop (a test client's per-request one): its reader belongs to the old loop
        if self._handle is None:
            try:
                handle = self._flux.Flux(self.uri) if self.uri else self._flux.Flux()
            except OSError as exc:
                raise FluxError(exc.errno or errno.EIO, f"cannot connect to {self.uri or '$FLUX_URI'}: {exc}") from None
            self._loop = asyncio.get_running_loop()
            self._fd = int(self._lib.flux_pollfd(handle.handle))
            if self._fd < 0:
                raise FluxError(self._ffi.errno or errno.EIO, f"cannot watch {self.uri or '$FLUX_URI'} (flux_pollfd)")
            self._loop.add_reader(self._fd, self._drain)
            self._handle = handle
        return self._handle.handle

    def _drain(self) -> None:
        """Every message the handle holds, each to its waiter (the reader callback, and the look after a send)."""
        self._look_scheduled = False
        if self._handle is None:
            return
        ffi, lib, h = self._ffi, self._lib, self._handle.handle
        lib.flux_pollevents(h)  # re-arms the edge-triggered descriptor
        while True:
            msg = lib.flux_recv(h, self._match[0], lib.FLUX_O_NONBLOCK)
            if msg == ffi.NULL:
                if ffi.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return
                self._fail_all(ffi.errno or errno.ECONNRESET)
                return
            try:
                self._deliver(msg)
            finally:
                lib.flux_msg_destroy(msg)

    def _deliver(self, msg: Any) -> None:
        ffi, lib = self._ffi, self._lib
        kind = ffi.new("int *")
        tag = ffi.new("uint32_t *")
        if lib.flux_msg_get_type(msg, kind) < 0 or kind[0] != lib.FLUX_MSGTYPE_RESPONSE:
            return
        if lib.flux_msg_get_matchtag(msg, tag) < 0:
            return
        if tag[0] in self._orphaned:
            self._orphaned.discard(tag[0])
            lib.flux_matchtag_free(self._handle.handle, tag[0])
            return
        waiter = self._pending.pop(tag[0], None)
        if waiter is None or waiter.done():
            return
        number = ffi.new("int *")
        lib.flux_msg_get_errnum(msg, number)
        if number[0]:
            text = ffi.new("const char **")
            said = lib.flux_response_decode_error(msg, text) == 0 and text[0] != ffi.NULL
            waiter.set_result((number[0], ffi.string(text[0]).decode(errors="replace") if said else "", None))
            return
        body = ffi.new("const char **")
        if lib.flux_msg_get_string(msg, body) < 0:
            waiter.set_result((errno.EPROTO, "malformed response", None))
            return
        payload = json.loads(ffi.string(body[0])) if body[0] != ffi.NULL else {}
        waiter.set_result((0, "", payload))

    def _fail_all(self, number: int) -> None:
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_result((number, f"connection to {self.uri or '$FLUX_URI'} failed", None))
        self._pending.clear()

    def _look_soon(self) -> None:
        if not self._look_scheduled and self._loop is not None:
            self._look_scheduled = True
            self._loop.call_soon(self._drain)

    async def _send(self, h: Any, msg: Any, deadline: float) -> None:
        """Send without blocking the loop; while the connection's buffer is full (flux-core far behind), wait."""
        ffi, lib = self._ffi, self._lib
        loop = asyncio.get_running_loop()
        while lib.flux_send(h, msg, lib.FLUX_O_NONBLOCK) < 0:
            number = ffi.errno
            if number not in (errno.EAGAIN, errno.EWOULDBLOCK):
                raise FluxError(number or errno.EIO, f"cannot send to {self.uri or '$FLUX_URI'}: {os.strerror(number)}")
            if loop.time() >= deadline:
                raise FluxError(errno.ETIMEDOUT, f"cannot send to {self.uri or '$FLUX_URI'}: its queue stays full")
            await asyncio.sleep(SEND_RETRY_SECONDS)

    async def rpc(self, topic: Topic[Answer], payload: Request, timeout: float = DEFAULT_TIMEOUT) -> Answer:
        """The response's payload, in the shape of the topic's answer; FluxError(errnum, the error's text) on an
        error response or after `timeout`."""
        ffi, lib = self._ffi, self._lib
        h = self._open()
        loop = asyncio.get_running_loop()
        tag = lib.flux_matchtag_alloc(h)
        if tag == lib.FLUX_MATCHTAG_NONE:
            raise FluxError(ffi.errno or errno.EAGAIN, "no matchtag free for a request")
        msg = lib.flux_request_encode(topic.name.encode(), json.dumps(payload).encode())
        if msg == ffi.NULL:
            lib.flux_matchtag_free(h, tag)
            raise FluxError(ffi.errno or errno.EINVAL, f"cannot encode a {topic.name} request")
        waiter: asyncio.Future[tuple[int, str, Any]] = loop.create_future()
        expiry = loop.call_later(timeout, _expire, waiter)
        sent = answered = False
        try:
            lib.flux_msg_set_matchtag(msg, tag)
            self._pending[tag] = waiter
            await self._send(h, msg, loop.time() + timeout)
            sent = True
            self._look_soon()
            try:
                number, text, body = await waiter
            except TimeoutError:
                raise FluxError(errno.ETIMEDOUT, f"no answer to {topic.name} within {timeout}s") from None
            answered = True
        finally:
            expiry.cancel()
            lib.flux_msg_destroy(msg)
            self._pending.pop(tag, None)
            if self._handle is not None:
                if sent and not answered:  # its answer may still come: the tag stays taken until then
                    self._orphaned.add(tag)
                else:
                    lib.flux_matchtag_free(h, tag)
        if number:
            raise FluxError(number, text or os.strerror(number))
        return cast(Answer, dict(body))  # where the answer enters: its shape is the topic's

    def close(self) -> None:
        if self._handle is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
                self._fail_all(errno.ECONNRESET)
            self._pending.clear()
            self._orphaned.clear()
        self._handle, self._loop = None, None  # flux.Flux closes its handle when collected


def _expire(waiter: asyncio.Future[tuple[int, str, Any]]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class FluxJobSource(JobService, Protocol):
    """What FluxLoopJobs needs of the flux flavour's blocking service (broker/rest/flux_service.py's
    FluxJobService): its flux-python package and URI, and the owners it remembers."""

    flux: Any  # the flux-python package (imported at start-up, untyped)
    uri: str | None

    def known_owner(self, jobid: int) -> str | None: ...
    def remember_owner(self, jobid: int, owner: str) -> None: ...


class FluxLoopJobs:
    """AsyncJobService of the flux flavour: one job's read awaited on the loop over AsyncFluxHandle; submits and
    listings stay in worker threads (flux.job.submit signs the jobspec in C, and job-list's listing streams)."""

    def __init__(self, service: FluxJobSource) -> None:
        self.service = service
        self.handle = AsyncFluxHandle(service.flux, service.uri)
        self._threads = InThreads(service)

    async def submit(self, request: SubmitRequest, userid: int) -> int:
        return await self._threads.submit(request, userid)

    async def jobs(self, limit: int = JOB_LIST_LIMIT, owners: bool = True) -> list[JobInfo]:
        return await self._threads.jobs(limit, owners)

    async def info(self, jobid: int) -> JobInfo:
        """job-list's record of the job (the request flux.job.job_list_id sends), with its owner."""
        try:
            reply = await self.handle.rpc(LIST_ID, {"id": jobid, "attrs": ["all"]})
        except FluxError as exc:
            if exc.errnum == errno.ENOENT:
                raise FluxError(errno.ENOENT, f"job {jobid} does not exist") from None
            raise FluxError(exc.errnum, f"cannot look up job {jobid}: {exc.message}") from None
        job = job_info_from_list(reply["job"])
        owner = self.service.known_owner(jobid)
        if owner is None:
            owner = await self._read_owner(jobid)
        return job._replace(owner=owner)

    async def _read_owner(self, jobid: int) -> str:
        """Who submitted a job we did not submit: its jobspec's attribute (job-info.lookup, as
        flux.job.job_info_lookup sends it; the jobspec comes as JSON text), remembered by the service."""
        try:
            reply = await self.handle.rpc(LOOKUP, {"id": jobid, "keys": ["jobspec"], "flags": 0})
        except FluxError as exc:
            if exc.errnum == errno.ENOENT:  # purged meanwhile: nobody's (only the superuser sees it)
                return ""
            raise FluxError(exc.errnum, f"cannot read the jobspec of job {jobid}: {exc.message}") from None
        text = reply.get("jobspec")
        spec: object = json.loads(text) if isinstance(text, str) else text
        owner = job_owner(spec) if isinstance(spec, dict) else ""
        self.service.remember_owner(jobid, owner)
        return owner

    def close(self) -> None:
        self.handle.close()
