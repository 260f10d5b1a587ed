"""The job listing answered from each job's kept view (broker/modules/job_manager/table.py encoded_view): a view
is re-made at the job's next event, so a listing never shows a job as it was; and the message that carries a
payload already encoded (broker/protocol.py) reads back as the same payload."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client import Handle
from broker.errors import FluxError
from broker.jobs.api import JobClient, JobInfo
from broker.jobs.build import build_jobspec
from broker.jobs.rest_records import detail_record
from broker.jobs.shapes import Jobspec
from broker.protocol import RESPONSE, Message
from broker.testing import Instance
from tests.waiting import holds_for, wait_until


def jobspec_with_owner(command: list[str], owner: str) -> Jobspec:
    """A jobspec as the REST API submits it for a tenant (broker/rest/jobs.py records the owner)."""
    spec = build_jobspec(command)
    spec["attributes"]["system"]["miniclusters"] = {"owner": owner}
    return spec


def test_an_encoded_payload_reads_back_as_the_payload() -> None:
    payload = {"jobs": [{"id": 1, "name": 'a ,"p": b'}, {"id": 2, "p": {"x": [1, 2]}}]}
    msg = Message(RESPONSE, "job-manager.list", matchtag=7, route=["c:00ff"], encoded_payload=json.dumps(payload))
    back = Message.decode(msg.encode())
    assert back.payload == payload and back.matchtag == 7 and back.route == ["c:00ff"]
    assert msg.decoded().payload == payload and not msg.encoded_payload  # for a reader in the same process


def _two_core_broker(make_instance: Callable[..., Instance]) -> tuple[Handle, str]:
    """One broker with two cores: a handle to it and its URI."""
    inst = make_instance(1)
    inst.start(0, "-Sresource.cores=0-1")
    inst.handle(0).close()
    return Handle(inst.uri(0)), inst.uri(0)


def _by_id(client: JobClient) -> dict[int, dict[str, object]]:
    reply = client.handle.rpc("job-manager.list", {"max_entries": 0})
    return {job["id"]: job for job in reply["jobs"]}


def test_a_listed_job_s_view_follows_its_events(make_instance: Callable[..., Instance]) -> None:
    handle, uri = _two_core_broker(make_instance)
    with JobClient(uri) as client:
        client.queue("stop")  # the jobs wait, so only what the test does changes them
        first, second, third = (client.submit(command=["sleep", "60"]) for _ in range(3))
        before = _by_id(client)
        assert [before[j]["state"] for j in (first, second, third)] == ["SCHED"] * 3
        assert _by_id(client) == before  # listed again, unchanged: the same views

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


# ------------------------------------------------------------------ the REST listing passed on undecoded (issue 27)
header_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=30) | st.sampled_from([',"p":', '\\",p', '"}'])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    topic=header_text,
    route=st.lists(header_text, max_size=3),
    errstr=header_text,
    matchtag=st.integers(0, 2**31),
    payload=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    spliced=st.booleans(),
)
def test_split_gives_the_header_and_the_payload_text(
    topic: str, route: list[str], errstr: str, matchtag: int, payload: dict[str, object], spliced: bool
) -> None:
    """Whatever the header's strings hold (even `,"p":`), split finds the payload: encode writes it last."""
    msg = Message(RESPONSE, topic, matchtag=matchtag, route=route, errnum=5 if errstr else 0, errstr=errstr)
    if spliced:
        msg.encoded_payload = json.dumps(payload)
    else:
        msg.payload = payload
    header, text = Message.split(msg.encode())
    assert (header.topic, header.route, header.matchtag, header.errstr) == (topic, route, matchtag, errstr)
    assert json.loads(text) == payload and header.payload == {}


def _restful_listing(handle: Handle, **extra: object) -> list[dict[str, Any]]:
    """job-manager.list's restful view, read raw: the REST API's records."""
    payload = {"max_entries": 0, "view": "restful", **extra}
    jobs: list[dict[str, Any]] = json.loads(handle.rpc_raw("job-manager.list", payload))["jobs"]  # open: records
    return jobs


def _restful_keyed(handle: Handle) -> dict[str, dict[str, Any]]:
    """The same view keyed by job id."""
    payload = {"max_entries": 0, "view": "restful", "keyed": True}
    jobs: dict[str, dict[str, Any]] = json.loads(handle.rpc_raw("job-manager.list", payload))["jobs"]  # open: records
    return jobs


def test_the_restful_view_is_the_rest_api_s_detailed_record(make_instance: Callable[..., Instance]) -> None:
    """job-manager.list's restful view, read raw, is record for record what the REST API used to build from the
    job-list view (detail_record of JobInfo); keyed, the same by id; an ended job's view is rendered ahead."""
    handle, uri = _two_core_broker(make_instance)
    with JobClient(uri) as client:
        assert _restful_listing(handle) == []  # listed once: from now on ended jobs' views are rendered ahead
        done = client.submit(command=["true"])
        failed = client.submit(command=["false"])
        for jobid in (done, failed):
            client.wait(jobid)
        wait_until(
            "the failed job is INACTIVE",
            lambda: handle.rpc("job-manager.info", {"id": failed})["state"] == "INACTIVE",
            timeout=10,
        )
        client.queue("stop")
        waiting = client.submit(command=["sleep", "60"])  # pending
        strip = {"runtime"}  # a clock for the pending job; the rest must agree field for field
        expected = [
            {k: v for k, v in detail_record(JobInfo.from_dict(job)).items() if k not in strip}
            for job in handle.rpc("job-manager.list", {"max_entries": 0})["jobs"]
        ]
        listed = _restful_listing(handle)
        assert [{k: v for k, v in job.items() if k not in strip} for job in listed] == expected
        assert [job["id"] for job in listed] == [waiting, failed, done]
        assert [job["result"] for job in listed] == ["", "FAILED", "COMPLETED"]
        keyed = _restful_keyed(handle)
        assert list(keyed) == [str(waiting), str(failed), str(done)]
        assert keyed[str(done)] == listed[2]
        client.cancel(waiting)
        client.queue("start")
    handle.close()


def test_a_restful_listing_keeps_one_owner_s_jobs_by_the_access_rule(make_instance: Callable[..., Instance]) -> None:
    handle, uri = _two_core_broker(make_instance)
    with JobClient(uri) as client:
        client.queue("stop")
        alice = client.submit(jobspec_with_owner(["true"], "alice"))
        nobody = client.submit(command=["true"])  # no recorded owner: the account whose uid submitted it
        uid = os.getuid()
        assert [j["id"] for j in _restful_listing(handle, owner={"name": "alice", "uid": -1})] == [alice]
        assert [j["id"] for j in _restful_listing(handle, owner={"name": "bob", "uid": uid})] == [nobody]
        assert _restful_listing(handle, owner={"name": "bob", "uid": -1}) == []
        # the first max_entries (pending ones by priority, then id), then the owner's among them, as GET /v1/jobs
        # lists for a tenant: bob's job is the second
        assert _restful_listing(handle, max_entries=1, owner={"name": "bob", "uid": uid}) == []
        assert [j["id"] for j in _restful_listing(handle, max_entries=2, owner={"name": "bob", "uid": uid})] == [nobody]
        for bad, field in (({"view": "html"}, "'view'"), ({"owner": {"uid": 3}}, "'owner'"), ({"keyed": 1}, "'keyed'")):
            with pytest.raises(FluxError, match=field):
                handle.rpc_raw("job-manager.list", bad)
        client.queue("start")
    handle.close()


def test_views_are_rendered_ahead_once_their_kind_was_listed(make_instance: Callable[..., Instance]) -> None:
    """After a first restful listing, jobs submitted later have their views ready before the next listing asks
    (broker/modules/job_manager/warmer.py); the listing then shows them as they are."""
    handle, uri = _two_core_broker(make_instance)
    with JobClient(uri) as client:
        client.queue("stop")
        client.submit(command=["true"])
        holds_for(  # nobody listed: none made
            "no view is made", lambda: handle.rpc("job-manager.stats")["views"] == {"kept": {}, "to_render": 0}, 0.3
        )
        assert len(_restful_listing(handle)) == 1
        ids = [client.submit(command=["true"]) for _ in range(150)]
        wait_until(
            "the 151 views rendered ahead",
            lambda: handle.rpc("job-manager.stats")["views"] == {"kept": {"restful": 151}, "to_render": 0},
            timeout=20,
        )
        listed = _restful_listing(handle)
        assert [job["id"] for job in listed][1:] == ids  # pending: by priority, then id
        client.queue("start")
        client.wait(ids[-1])
        final = {job["id"]: job for job in _restful_listing(handle)}
        assert final[ids[-1]]["state"] == "INACTIVE" and final[ids[-1]]["result"] == "COMPLETED"
    handle.close()
