"""The job listing answered from each job's kept view (broker/modules/job_manager/table.py encoded_view): a view
is re-made at the job's next event, so a listing never shows a job as it was; and the message that carries a
payload already encoded (broker/protocol.py) reads back as the same payload."""

from __future__ import annotations

from collections.abc import Callable

from broker.client import Handle
from broker.jobs.api import JobClient
from broker.protocol import RESPONSE, Message
from broker.testing import Instance


def test_an_encoded_payload_reads_back_as_the_payload() -> None:
    payload = {"jobs": [{"id": 1, "name": 'a ,"p": b'}, {"id": 2, "p": {"x": [1, 2]}}]}
    import json

    msg = Message(RESPONSE, "job-manager.list", matchtag=7, route=["c:00ff"], encoded_payload=json.dumps(payload))
    back = Message.decode(msg.encode())
    assert back.payload == payload and back.matchtag == 7 and back.route == ["c:00ff"]
    assert msg.decoded().payload == payload and not msg.encoded_payload  # for a reader in the same process


def _by_id(client: JobClient) -> dict[int, dict[str, object]]:
    reply = client.handle.rpc("job-manager.list", {"max_entries": 0})
    return {job["id"]: job for job in reply["jobs"]}


def test_a_listed_job_s_view_follows_its_events(make_instance: Callable[..., Instance]) -> None:
    inst = make_instance(1)
    inst.start(0, "-Sresource.cores=0-1")
    inst.handle(0).close()
    with JobClient(inst.uri(0)) as client:
        client.queue("stop")  # the jobs wait, so only what the test does changes them
        first, second, third = (client.submit(command=["sleep", "60"]) for _ in range(3))
        before = _by_id(client)
        assert [before[j]["state"] for j in (first, second, third)] == ["SCHED"] * 3
        assert _by_id(client) == before  # listed again, unchanged: the same views

        handle = Handle(inst.uri(0))
        handle.rpc("job-manager.urgency", {"id": second, "urgency": 31})
        client.cancel(third, note="no longer wanted")
        after = _by_id(client)
        assert after[second]["urgency"] == 31 and after[second]["priority"] != before[second]["priority"]
        assert after[third]["state"] in ("CLEANUP", "INACTIVE") and after[third]["exception"] == {
            "occurred": True, "type": "cancel", "note": "no longer wanted", "severity": 0,
        }  # fmt: skip
        assert after[first] == before[first]
        listed = client.handle.rpc("job-manager.list", {"max_entries": 0})["jobs"]
        assert listed[0]["id"] == second  # the most urgent first among the pending
        for job in listed:  # each as job-manager.info says it, field for field (runtime aside: it is a clock)
            info = handle.rpc("job-manager.info", {"id": job["id"]})
            assert {k: v for k, v in job.items() if k != "runtime"} == {k: v for k, v in info.items() if k != "runtime"}
        handle.close()
        client.queue("start")
