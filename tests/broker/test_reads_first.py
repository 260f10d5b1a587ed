"""Reads ahead of writes on a real broker (broker/routing.py READS_FIRST), and the REST server's event-loop
client of it (broker/rest/async_broker.py): concurrent requests on one socket, matched by tag."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import zmq
import zmq.asyncio

from broker.client import Handle
from broker.errors import FluxError
from broker.jobs.api import JobClient
from broker.jobs.build import build_jobspec
from broker.protocol import Message
from broker.rest.async_broker import AsyncBrokerJobs, AsyncHandle
from broker.rest.local_handle import LocalAsyncHandle
from broker.rest.topics import Topic
from broker.testing import Instance
from tests.waiting import async_wait_until


def _started(make_instance: Callable[..., Instance]) -> Instance:
    inst = make_instance(1)
    inst.start(0, "-Sresource.cores=0-1")
    inst.handle(0).close()
    return inst


def test_a_client_s_own_requests_keep_their_order_when_reads_go_first(
    make_instance: Callable[..., Instance],
) -> None:
    """One client pipelines a cancel then a read of the same job, in one batch: the read must see the cancel
    (reads go first only across clients, never past a request of their own client that came before)."""
    inst = _started(make_instance)
    with JobClient(inst.uri(0)) as client:
        client.queue("stop")  # the job waits in the queue, so only the cancel changes it
        jobid = client.submit(command=["sleep", "60"])
        handle = Handle(inst.uri(0))
        cancel = handle.send_request("job-manager.cancel", {"id": jobid, "note": "ordered"})
        read = handle.send_request("job-manager.info", {"id": jobid})
        info = handle.wait(read)
        handle.wait(cancel)
        handle.close()
        assert info["exception"]["occurred"] and info["exception"]["note"] == "ordered"
        client.queue("start")


def test_the_event_loop_client_matches_answers_and_reads_a_real_broker(make_instance: Callable[..., Instance]) -> None:
    inst = _started(make_instance)

    async def scenario() -> tuple[list[int], list[str], int]:
        jobs = AsyncBrokerJobs(inst.uri(0))
        try:
            spec = build_jobspec(["true"])
            ids = await asyncio.gather(*(jobs.submit_jobspec(spec, userid=0) for _ in range(20)))
            infos = await asyncio.gather(*(jobs.info(jobid) for jobid in reversed(ids)))
            with pytest.raises(FluxError) as missing:
                await jobs.info(12345)
            return list(ids), [str(i.id) for i in infos], missing.value.errnum
        finally:
            jobs.close()

    ids, infos, errnum = asyncio.run(scenario())
    assert len(set(ids)) == 20 and infos == [str(i) for i in reversed(ids)]  # each answer to its own request
    assert errnum == 2  # ENOENT, as the blocking client says


@pytest.mark.parametrize("handle_class", [AsyncHandle, LocalAsyncHandle])
def test_a_slow_answer_holds_up_no_other_request_on_the_shared_socket(
    tmp_path: Path, handle_class: type[AsyncHandle | LocalAsyncHandle]
) -> None:
    """A fake broker (a real ZeroMQ ROUTER) answers a slow topic late and others at once; on one socket, the
    fast request is answered first, and a request with no answer times out with ETIMEDOUT."""
    endpoint = tmp_path / "broker"
    router = zmq.asyncio.Context.instance().socket(zmq.ROUTER)
    router.bind(f"ipc://{endpoint}")

    held: list[tuple[bytes, Message]] = []

    async def serve() -> None:
        while True:
            ident, frame = await router.recv_multipart()
            msg = Message.decode(frame)
            if msg.topic == "slow":
                held.append((ident, msg))
            elif msg.topic == "fast":
                await router.send_multipart([ident, msg.response({"answer": "fast"}).encode()])
                for slow_ident, slow in held:  # only now: the fast one went past it
                    await router.send_multipart([slow_ident, slow.response({"answer": "slow"}).encode()])
                held.clear()

    async def scenario() -> tuple[list[str], int]:
        server = asyncio.ensure_future(serve())
        handle = handle_class(f"local://{endpoint}")
        order: list[str] = []

        async def call(topic: str) -> None:
            order.append((await handle.rpc(Topic(topic), {}))["answer"])

        slow = asyncio.ensure_future(call("slow"))
        await async_wait_until("the fake broker holds the slow request", lambda: held)
        await asyncio.wait_for(call("fast"), 5)
        await asyncio.wait_for(slow, 5)
        with pytest.raises(FluxError) as unanswered:  # ETIMEDOUT (asserted below), not a hang
            await handle.rpc(Topic("nobody"), {}, timeout=0.3)
        handle.close()
        server.cancel()
        return order, unanswered.value.errnum

    try:
        order, errnum = asyncio.run(scenario())
    finally:
        router.close(0)
    assert order == ["fast", "slow"] and errnum == 110
