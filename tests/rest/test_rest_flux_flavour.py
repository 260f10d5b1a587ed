"""The REST API's flux flavour (FluxJobService) against a FAKE `flux` package.

flux-core cannot be installed here, so the fixture below puts a small stand-in for flux-python into sys.modules.
It implements only what FluxJobService calls, with the real names, signatures and return shapes; each piece cites
the flux-core file (src/bindings/python/flux/...) and function it mirrors, and it enforces what the real bindings
and instance would (unknown job ids raise OSError(ENOENT), JobspecV1.from_command validates its counts, ...).
"""

from __future__ import annotations

import base64
import collections.abc
import errno
import json
import os
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from broker.client import FluxError
from broker.rest.app import create_app
from broker.rest.flux_service import FluxJobService, job_info_from_flux
from broker.rest.jobs import SubmitRequest, parse_submit
from broker.rest.settings import RestSettings
from broker.rest.users import UserStore

URI = "local:///tmp/fake-flux/local"
HOSTS = ["node0", "node1", "node2"]

# flux/job.h (flux.constants): job states and results as job-list reports them
STATE_NAMES = {1: "NEW", 2: "DEPEND", 4: "PRIORITY", 8: "SCHED", 16: "RUN", 32: "CLEANUP", 64: "INACTIVE"}
RUN, INACTIVE = 16, 64
RESULT_NAMES = {1: "COMPLETED", 2: "FAILED", 4: "CANCELED", 8: "TIMEOUT"}
COMPLETED, CANCELED = 1, 4


class FakeInstance:
    """The instance behind the fake bindings: jobs and their RFC 24 output eventlogs."""

    def __init__(self) -> None:
        self.jobs: dict[int, dict[str, Any]] = {}
        self.jobspecs: dict[int, dict[str, Any]] = {}
        self.output: dict[int, list[dict[str, Any]]] = {}
        self.next_id = 1 << 30
        self.shutdowns: list[dict[str, Any]] = []

    def job(self, jobid: int) -> dict[str, Any]:
        if int(jobid) not in self.jobs:
            # job-manager / job-list answer "unknown job" with ENOENT; the bindings raise it as OSError
            raise FileNotFoundError(errno.ENOENT, "No such file or directory")
        return self.jobs[int(jobid)]

    def write(self, jobid: int, text: str, stream: str = "stdout", encode: bool = False) -> None:
        context: dict[str, Any] = {"stream": stream, "rank": "0", "data": text}
        if encode:
            context["data"] = base64.b64encode(text.encode()).decode()
            context["encoding"] = "base64"
        self.output[jobid].append({"timestamp": time.time(), "name": "data", "context": context})

    def start(self, jobspec: dict[str, Any]) -> int:
        jobid = self.next_id
        self.next_id += 1
        command = jobspec["tasks"][0]["command"]
        now = time.time()
        # a job-list.list-id answer for a running job: no result, waitstatus or exception attributes yet
        self.jobs[jobid] = {
            "id": jobid,
            "userid": os.getuid(),
            "urgency": 16,
            "priority": 16,
            "t_submit": now,
            "t_depend": now,
            "t_run": now,
            "state": RUN,
            "name": os.path.basename(command[0]),
            "cwd": jobspec["attributes"]["system"].get("cwd", ""),
            "ntasks": 1,
            "ncores": 1,
            "duration": jobspec["attributes"]["system"]["duration"],
            "nnodes": 1,
            "ranks": "0",
            "nodelist": HOSTS[0],
            "annotations": {},
        }
        self.jobspecs[jobid] = jobspec
        self.output[jobid] = [
            {"timestamp": now, "name": "header", "context": {"version": 1, "count": {"stdout": 1, "stderr": 1}}}
        ]
        if command[0] == "echo":
            self.write(jobid, " ".join(command[1:]) + "\n")
            self.write(jobid, "to stderr\n", stream="stderr", encode=True)
            self.finish(jobid, 0)
        elif command[0] == "partial":
            self.write(jobid, command[1])
        return jobid

    def finish(self, jobid: int, status: int, result: int = COMPLETED, exception: str = "", note: str = "") -> None:
        now = time.time()
        job = self.jobs[jobid]
        job.update(state=INACTIVE, result=result, t_cleanup=now, t_inactive=now, success=result == COMPLETED)
        if status >= 0:
            job["waitstatus"] = status
        job["exception_occurred"] = bool(exception)
        if exception:
            job.update(exception_severity=0, exception_type=exception, exception_note=note)


INSTANCE = FakeInstance()


# ---- flux (flux/core/handle.py) -------------------------------------------------------------------------------


class FakeRPC:
    """flux/rpc.py RPC: a future whose get() returns the decoded payload or raises OSError."""

    def __init__(self, result: Any = None, error: OSError | None = None) -> None:
        self.result, self.error = result, error

    def get(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class Flux:
    """flux/core/handle.py Flux(url=ffi.NULL, flags=0, handle=None): raises OSError when it cannot connect."""

    def __init__(self, url: Any = None, flags: int = 0, handle: Any = None) -> None:
        target = url or os.environ.get("FLUX_URI")
        if target != URI:
            raise OSError(errno.ENOENT, f"Unable to connect to Flux: {target}")
        self.url = target

    # flux/core/handle.py Flux.rpc(topic, payload=None, nodeid=FLUX_NODEID_ANY, flags=0) -> RPC
    def rpc(self, topic: str, payload: Any = None, nodeid: int = -1, flags: int = 0) -> FakeRPC:
        if topic == "shutdown.start":  # src/cmd/builtin/shutdown.c: {"loglevel": i}
            if not isinstance(payload, dict) or not isinstance(payload.get("loglevel"), int):
                return FakeRPC(error=OSError(errno.EPROTO, "Protocol error"))
            INSTANCE.shutdowns.append(payload)
            return FakeRPC({})
        return FakeRPC(error=OSError(errno.ENOSYS, "Function not implemented"))

    # flux/core/handle.py Flux.close(): refuses manual close
    def close(self) -> None:
        raise RuntimeError("Unnecessary manual invocation of a Flux handle's close method")


# ---- flux.job ----------------------------------------------------------------------------------------------------


class JobspecV1:
    """flux/job/Jobspec.py JobspecV1 (only what FluxJobService uses)."""

    def __init__(self, resources: list[Any], tasks: list[Any], **kwargs: Any) -> None:
        self.jobspec = {"resources": resources, "tasks": tasks, "attributes": kwargs["attributes"], "version": 1}

    # flux/job/Jobspec.py JobspecV1.from_command(command, num_tasks=1, cores_per_task=1, gpus_per_task=None,
    #                                            num_nodes=None, exclusive=False), with its checks
    @classmethod
    def from_command(
        cls,
        command: list[str],
        num_tasks: int = 1,
        cores_per_task: int = 1,
        gpus_per_task: int | None = None,
        num_nodes: int | None = None,
        exclusive: bool = False,
    ) -> JobspecV1:
        if not isinstance(num_tasks, int) or num_tasks < 1:
            raise ValueError("task count must be a integer >= 1")
        if not isinstance(cores_per_task, int) or cores_per_task < 1:
            raise ValueError("cores per task must be an integer >= 1")
        if gpus_per_task is not None and (not isinstance(gpus_per_task, int) or gpus_per_task < 0):
            raise ValueError("gpus per task must be an integer >= 0")
        if num_nodes is not None:
            if not isinstance(num_nodes, int) or num_nodes < 1:
                raise ValueError("node count must be an integer >= 1 (if set)")
            if num_nodes > num_tasks:
                raise ValueError("node count must not be greater than task count")
        elif exclusive:
            raise ValueError("exclusive can only be set with a node count")
        children: list[dict[str, Any]] = [{"type": "core", "count": cores_per_task}]
        if gpus_per_task not in (None, 0):
            children.append({"type": "gpu", "count": gpus_per_task})
        resource: dict[str, Any] = {"type": "slot", "count": num_tasks, "label": "task", "with": children}
        if num_nodes is not None:
            resource = {"type": "node", "count": num_nodes, "with": [resource | {"count": -(-num_tasks // num_nodes)}]}
            if exclusive:
                resource["exclusive"] = True
        tasks = [{"command": list(command), "slot": "task", "count": {"per_slot": 1}}]
        return cls([resource], tasks, attributes={"system": {"duration": 0}})

    # flux/job/Jobspec.py Jobspec.setattr(key, val) (dotted key under "attributes")
    def setattr(self, key: str, val: Any) -> None:
        node = self.jobspec
        parts = ("attributes." + key if not key.startswith("attributes.") else key).split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = val

    # flux/job/Jobspec.py Jobspec.setattr_shell_option(key, val)
    def setattr_shell_option(self, key: str, val: Any) -> None:
        self.setattr("system.shell.options." + key, val)

    # flux/job/Jobspec.py Jobspec.duration setter: int/float/str/timedelta, not negative
    @property
    def duration(self) -> Any:
        return self.jobspec["attributes"]["system"].get("duration")

    @duration.setter
    def duration(self, duration: Any) -> None:
        if not isinstance(duration, int | float):
            raise TypeError("duration must be an int, float, string, or timedelta")
        if duration < 0:
            raise ValueError("duration must not be negative")
        self.setattr("system.duration", float(duration))

    # flux/job/Jobspec.py Jobspec.cwd setter: a string (or PathLike)
    @property
    def cwd(self) -> Any:
        return self.jobspec["attributes"]["system"].get("cwd")

    @cwd.setter
    def cwd(self, cwd: Any) -> None:
        if not isinstance(cwd, str):
            raise ValueError("cwd must be a string")
        self.setattr("system.cwd", cwd)

    # flux/job/Jobspec.py Jobspec.environment setter: a Mapping
    @property
    def environment(self) -> Any:
        return self.jobspec["attributes"]["system"].get("environment")

    @environment.setter
    def environment(self, environ: Any) -> None:
        if not isinstance(environ, collections.abc.Mapping):
            raise ValueError("environment must be a mapping")
        self.setattr("system.environment", environ)


# flux/job/submit.py submit(flux_handle, jobspec, urgency=16, waitable=False, debug=False, pre_signed=False) -> JobID
def submit(
    flux_handle: Flux,
    jobspec: JobspecV1,
    urgency: int = 16,
    waitable: bool = False,
    debug: bool = False,
    pre_signed: bool = False,
) -> int:
    assert isinstance(flux_handle, Flux)
    system = jobspec.jobspec["attributes"]["system"]
    if not isinstance(system.get("duration"), int | float):  # V1 validation in the job-ingest validator
        raise OSError(errno.EINVAL, "attributes.system.duration must be a number")
    json.dumps(jobspec.jobspec)  # the jobspec is sent as JSON (Jobspec.dumps)
    return INSTANCE.start(jobspec.jobspec)


# flux/job/kill.py cancel(flux_handle, jobid, reason=None): job-manager raises ENOENT for an unknown job
def cancel(flux_handle: Flux, jobid: int, reason: str | None = None) -> None:
    job = INSTANCE.job(jobid)
    if job["state"] == INACTIVE:
        raise OSError(errno.EINVAL, "job is inactive")
    INSTANCE.finish(int(jobid), -1, result=CANCELED, exception="cancel", note=reason or "")


class JobInfo:
    """flux/job/info.py JobInfo: job-list attributes with `defaults`, state/result names, returncode, runtime."""

    defaults = {
        "t_depend": 0.0, "t_run": 0.0, "t_cleanup": 0.0, "t_inactive": 0.0, "duration": 0.0, "expiration": 0.0,
        "name": "", "cwd": "", "queue": "", "project": "", "bank": "", "ntasks": "", "ncores": "", "nnodes": "",
        "priority": "", "ranks": "", "nodelist": "", "success": "", "result": "", "waitstatus": "",
    }  # fmt: skip

    def __init__(self, info_resp: dict[str, Any]) -> None:
        self.data = self.defaults | info_resp

    # flux/job/info.py JobInfo.returncode
    def returncode(self) -> Any:
        status, result = self.data["waitstatus"], self.data["result"]
        if not isinstance(status, int):
            return -128 if result == CANCELED else 1 if result == 2 else ""
        if os.WIFSIGNALED(status):
            return -os.WTERMSIG(status)
        return os.WEXITSTATUS(status)

    # flux/job/info.py JobInfo.to_dict(filtered=True): `defaults` + `properties` + annotations + exception
    def to_dict(self, filtered: bool = True) -> dict[str, Any]:
        assert filtered is False, "FluxJobService asks for the unfiltered dict"
        data = self.data
        t_run, t_cleanup = data["t_run"], data["t_cleanup"]
        runtime = t_cleanup - t_run if t_cleanup > 0 and t_run > 0 else time.time() - t_run if t_run > 0 else 0.0
        result = {key: data[key] for key in self.defaults}
        result |= {
            "id": data["id"],
            "t_submit": data["t_submit"],
            "t_remaining": 0.0,
            "state": STATE_NAMES[data["state"]],  # flux_job_statetostr(state, "L")
            "result": RESULT_NAMES.get(data["result"], ""),  # resulttostr: "" if not returned
            "username": "someone",
            "userid": data["userid"],
            "urgency": data["urgency"],
            "runtime": runtime,
            "status": STATE_NAMES[data["state"]],
            "returncode": self.returncode(),
            "dependencies": [],
        }
        result["annotations"] = data.get("annotations", {})
        result["exception"] = {
            "occurred": data.get("exception_occurred", ""),
            "severity": data.get("exception_severity", ""),
            "type": data.get("exception_type", ""),
            "note": data.get("exception_note", ""),
        }
        return result


# flux/job/list.py get_job(flux_handle, jobid) -> JobInfo(...).to_dict(filtered=False), or None when unknown
def get_job(flux_handle: Flux, jobid: int) -> dict[str, Any] | None:
    try:
        job = INSTANCE.job(jobid)
    except FileNotFoundError:
        return None
    return JobInfo(job).to_dict(filtered=False)


class JobList:
    """flux/job/list.py JobList(flux_handle, attrs=["all"], filters=[], ids=[], user=None, max_entries=1000, ...)."""

    def __init__(
        self,
        flux_handle: Flux,
        attrs: list[str] | None = None,
        filters: list[str] | None = None,
        ids: list[int] | None = None,
        user: str | None = None,
        max_entries: int = 1000,
        since: float = 0.0,
        name: str | None = None,
        queue: str | None = None,
    ) -> None:
        # JobList.set_user: None means only the caller's jobs, "all" every user's
        self.userid = None if user == "all" else os.getuid() if user is None else int(user)
        self.max_entries = max_entries

    # flux/job/list.py JobList.jobs() -> [JobInfo]
    def jobs(self) -> list[JobInfo]:
        jobs = [j for j in INSTANCE.jobs.values() if self.userid is None or j["userid"] == self.userid]
        return [JobInfo(job) for job in reversed(jobs)][: self.max_entries]


# flux/job/kvslookup.py job_kvs_lookup(flux_handle, jobid, keys=["jobspec"], decode=True, original=False,
# base=False) -> {"id": ..., key: value}, or None when the job (or the key) does not exist (FileNotFoundError)
def job_kvs_lookup(
    flux_handle: Flux,
    jobid: int,
    keys: list[str] | None = None,
    decode: bool = True,
    original: bool = False,
    base: bool = False,
) -> dict[str, Any] | None:
    if int(jobid) not in INSTANCE.jobs:
        return None
    reply: dict[str, Any] = {"id": int(jobid)}
    for key in keys or ["jobspec"]:
        if key == "guest.output":
            reply[key] = "".join(json.dumps(event) + "\n" for event in INSTANCE.output[int(jobid)])
        elif key == "jobspec":
            reply[key] = INSTANCE.jobspecs[int(jobid)]
        else:
            return None
    return reply


class EventLogEvent(dict[str, Any]):
    """flux/job/event.py EventLogEvent(event): a dict from a JSON string or dict; name/timestamp/context."""

    def __init__(self, event: str | dict[str, Any]) -> None:
        if isinstance(event, str):
            event = json.loads(event)
        super().__init__(event)
        if "context" not in self:
            self["context"] = {}

    @property
    def name(self) -> str:
        return str(self["name"])

    @property
    def timestamp(self) -> float:
        return float(self["timestamp"])

    @property
    def context(self) -> dict[str, Any]:
        return dict(self["context"])


# ---- flux.resource -----------------------------------------------------------------------------------------------


class Hostlist:
    """flux/hostlist.py Hostlist: len(), [i] and iteration give hostnames."""

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = list(hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def __getitem__(self, index: int) -> str:
        return self.hosts[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self.hosts)


class ResourceSet:
    """flux/resource/ResourceSet.py ResourceSet.nodelist -> Hostlist."""

    def __init__(self, hosts: list[str]) -> None:
        self.nodelist = Hostlist(hosts)


class SchedResourceList:
    """flux/resource/list.py SchedResourceList: all/down/allocated, and up = all - down."""

    def __init__(self, down: set[str]) -> None:
        self.all = ResourceSet(HOSTS)
        self.down = ResourceSet([h for h in HOSTS if h in down])
        self.up = ResourceSet([h for h in HOSTS if h not in down])


class ResourceListRPC:
    # flux/resource/list.py ResourceListRPC.get() -> SchedResourceList
    def get(self) -> SchedResourceList:
        return SchedResourceList(down={"node2"})


# flux/resource/list.py resource_list(flux_handle) -> ResourceListRPC
def resource_list(flux_handle: Flux) -> ResourceListRPC:
    assert isinstance(flux_handle, Flux)
    return ResourceListRPC()


@pytest.fixture
def fake_flux(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeInstance]:
    global INSTANCE
    INSTANCE = FakeInstance()
    package = types.ModuleType("flux")
    job = types.ModuleType("flux.job")
    resource = types.ModuleType("flux.resource")
    package.__path__ = []  # a package, so `import flux.job` resolves through sys.modules
    package.Flux = Flux  # type: ignore[attr-defined]
    for name, value in {
        "JobspecV1": JobspecV1, "submit": submit, "cancel": cancel, "JobInfo": JobInfo, "get_job": get_job,
        "JobList": JobList, "job_kvs_lookup": job_kvs_lookup, "EventLogEvent": EventLogEvent,
    }.items():  # fmt: skip
        setattr(job, name, value)
    resource.resource_list = resource_list  # type: ignore[attr-defined]
    resource.SchedResourceList = SchedResourceList  # type: ignore[attr-defined]
    package.job = job  # type: ignore[attr-defined]
    package.resource = resource  # type: ignore[attr-defined]
    for name, module in (("flux", package), ("flux.job", job), ("flux.resource", resource)):
        monkeypatch.setitem(sys.modules, name, module)
    yield INSTANCE


@pytest.fixture
def service(fake_flux: FakeInstance) -> FluxJobService:
    return FluxJobService(URI)


def test_service_submit_info_list_output_cancel_nodes(service: FluxJobService, fake_flux: FakeInstance) -> None:
    request = parse_submit({"command": "echo hello", "envars": "GREETING=hi", "option_flags": "cpu-affinity=off"})
    jobid = service.submit(request, os.getuid())
    jobspec = fake_flux.jobspecs[jobid]
    system = jobspec["attributes"]["system"]
    assert system["environment"]["GREETING"] == "hi" and "FLUX_TOKEN" not in system["environment"]
    assert system["shell"]["options"] == {"cpu-affinity": "off"}
    assert system["cwd"] == os.getcwd() and system["duration"] == 0.0

    info = service.info(jobid)
    assert (info.id, info.state, info.result, info.returncode, info.success) == (
        jobid,
        "INACTIVE",
        "COMPLETED",
        0,
        True,
    )
    assert (info.nodelist, info.name, info.exception_type) == ("node0", "echo", "")
    assert info.to_restful()["exception"] == {"occurred": False, "type": "", "note": ""}
    assert [j.id for j in service.jobs()] == [jobid]

    lines, offset, done = service.output(jobid)
    assert (lines, offset, done) == (["hello\n", "to stderr\n"], 2, True)  # stderr was base64-encoded
    assert service.output(jobid, offset) == ([], 2, True)

    sleeper = service.submit(parse_submit({"command": "sleep 100", "runtime": 60, "num_nodes": 2}), os.getuid())
    running = service.info(sleeper)
    assert (running.state, running.result, running.returncode, running.active) == ("RUN", "", None, True)
    assert fake_flux.jobspecs[sleeper]["resources"][0]["type"] == "node"
    assert fake_flux.jobspecs[sleeper]["attributes"]["system"]["duration"] == 60.0
    service.cancel(sleeper)
    canceled = service.info(sleeper)
    assert (canceled.state, canceled.result, canceled.returncode) == ("INACTIVE", "CANCELED", -128)
    assert (canceled.exception_type, canceled.exception_note) == ("cancel", "canceled through the REST API")
    with pytest.raises(FluxError) as again:
        service.cancel(sleeper)
    assert again.value.errnum == errno.EINVAL

    assert service.nodes() == ["node0", "node1"]  # node2 is down
    service.shutdown()
    assert fake_flux.shutdowns == [{"loglevel": 4}]
    service.close()


def test_service_unknown_jobs_are_enoent(service: FluxJobService) -> None:
    for call in (service.info, service.cancel, service.output):
        with pytest.raises(FluxError) as caught:
            call(12345)  # type: ignore[operator]
        assert caught.value.errnum == errno.ENOENT


def test_service_refuses_other_users_and_bad_requests(service: FluxJobService, fake_flux: FakeInstance) -> None:
    with pytest.raises(FluxError) as other:
        service.submit(SubmitRequest(command=["true"]), os.getuid() + 1)
    assert other.value.errnum == errno.EPERM and "flux-security" in other.value.message
    with pytest.raises(FluxError) as bad:
        service.submit(SubmitRequest(command=["true"], exclusive=True), os.getuid())  # no node count
    assert bad.value.errnum == errno.EINVAL and "exclusive" in bad.value.message
    assert fake_flux.jobs == {}


def test_service_output_holds_partial_lines_until_the_job_ends(
    service: FluxJobService, fake_flux: FakeInstance
) -> None:
    jobid = service.submit(SubmitRequest(command=["partial", "one\ntw"]), os.getuid())
    assert service.output(jobid) == (["one\n"], 1, False)
    assert service.output(jobid, 1) == ([], 1, False)
    fake_flux.write(jobid, "o\nthree")
    fake_flux.finish(jobid, 0)
    assert service.output(jobid, 1, wait=True) == (["two\n", "three"], 3, True)


def test_connection_errors_are_flux_errors(fake_flux: FakeInstance) -> None:
    with pytest.raises(FluxError) as caught:
        FluxJobService("local:///nowhere").jobs()
    assert caught.value.errnum == errno.ENOENT and "cannot connect" in caught.value.message


def test_job_info_from_flux_handles_unset_values() -> None:
    info = job_info_from_flux(
        JobInfo({"id": 7, "userid": 5, "urgency": 16, "t_submit": 1.0, "state": 8}).to_dict(False)
    )
    assert (info.state, info.result, info.returncode, info.nnodes, info.priority, info.waitstatus) == (
        "SCHED", "", None, 0, 0, None,
    )  # fmt: skip


def test_rest_api_over_the_flux_flavour(service: FluxJobService, fake_flux: FakeInstance, tmp_path: Path) -> None:
    settings = RestSettings(state_dir=tmp_path, require_auth=False, token_signing_key="k" * 40)
    client = TestClient(create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4)))

    reply = client.post("/v1/jobs/submit", json={"command": "echo via rest"})
    assert reply.status_code == 200, reply.text
    jobid = reply.json()["id"]
    job = client.get(f"/v1/jobs/{jobid}").json()
    assert (job["state"], job["result"], job["returncode"], job["nodelist"]) == ("INACTIVE", "COMPLETED", 0, "node0")
    assert [j["id"] for j in client.get("/v1/jobs", params={"detailed": True}).json()["jobs"]] == [jobid]
    assert client.get(f"/v1/jobs/{jobid}/output").json() == {"Output": ["via rest\n", "to stderr\n"]}
    assert client.get(f"/v1/jobs/{jobid}/output/stream").text == "via rest\nto stderr\n"

    sleeper = client.post("/v1/jobs/submit", json={"command": "sleep 100"}).json()["id"]
    assert client.post(f"/v1/jobs/{sleeper}/cancel").status_code == 200
    assert client.get(f"/v1/jobs/{sleeper}").json()["result"] == "CANCELED"
    assert client.post(f"/v1/jobs/{sleeper}/cancel").status_code == 400  # already inactive

    assert client.get("/v1/nodes").json() == {"nodes": ["node0", "node1"]}
    assert client.get("/v1/jobs/123456").status_code == 404
    assert client.post("/v1/jobs/123456/cancel").status_code == 400  # as the reference server answers
    assert "Message" in client.get("/v1/jobs/123456/output").json()  # 200 with a Message, as the reference
    assert client.post("/v1/service/stop").status_code == 200
    assert fake_flux.shutdowns == [{"loglevel": 4}]


def test_rest_api_flux_flavour_refuses_multi_user_submission(
    service: FluxJobService, fake_flux: FakeInstance, tmp_path: Path
) -> None:
    if os.getuid() == 65534:
        pytest.skip("runs as nobody")
    settings = RestSettings(
        state_dir=tmp_path, mode="multi-user", min_uid=0, token_signing_key="k" * 40, superuser="", require_auth=True
    )
    users = UserStore(tmp_path / "users.db", rounds=4)
    users.add("nobody", "pw")  # an account whose uid is not the server's
    client = TestClient(create_app(settings, service, users))
    reply = client.post("/v1/jobs/submit", json={"command": "true"}, auth=("nobody", "pw"))
    assert reply.status_code == 400
    assert "flux-security" in reply.json()["Errors"][0]
    assert fake_flux.jobs == {}


def test_server_flux_flavour_without_flux_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MINICLUSTER_FLAVOUR", "PYTHONPATH")}
    env["FLUX_URI"] = f"local://{tmp_path}/local"
    probe = subprocess.run([sys.executable, "-c", "import flux"], env=env, capture_output=True)
    if probe.returncode == 0:
        pytest.skip("flux-python is installed here")
    for args, extra in ((["--flavour", "flux"], {}), ([], {"MINICLUSTER_FLAVOUR": "flux"})):
        done = subprocess.run(
            [sys.executable, "-m", "broker.rest.server", *args],
            env=env | extra,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "flux-core's Python bindings" in done.stderr and "--flavour builtin" in done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "broker.rest.server"],
        env=env | {"MINICLUSTER_FLAVOUR": "slurm"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "expected builtin or flux" in bad.stderr
