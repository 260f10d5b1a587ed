"""The REST API's flux flavour (FluxJobService) against REAL flux-core: a `flux start --test-size=2` instance of the
build `make flux-core` makes, driven through flux-core's own Python bindings (no stand-in package)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict, cast

import pytest
from fastapi.testclient import TestClient

from broker.client import FluxError
from broker.rest.app import create_app
from broker.rest.flux_records import job_info_from_list
from broker.rest.flux_service import FluxJobService
from broker.rest.jobs import SubmitError, SubmitRequest, parse_submit
from broker.rest.settings import RestSettings
from broker.rest.topics import LIST_ID, FluxJobRecord, Request, Topic
from broker.rest.users import UserStore
from broker.testing import wait_for
from tests.waiting import async_wait_until_answered


class KvsRoot(TypedDict):
    """kvs.getroot's (and kvs.wait-version's) answer, as much as the test reads."""

    rootseq: int


@pytest.fixture(scope="module")
def bindings(flux_core: Any) -> Iterator[Any]:
    """flux-core's Python package, imported from the build (what the flux view's PYTHONPATH gives a pod)."""
    path = str(flux_core.python_path)
    sys.path.insert(0, path)
    try:
        import flux.job

        yield flux
    finally:
        sys.path.remove(path)


RUN_THEN_IDLE = 'touch "$0/running"; exec sleep 3600'


class RealInstance:
    """Two real brokers on this machine; the initial program idles until `flux shutdown`."""

    def __init__(self, flux: Path, rundir: Path) -> None:
        self.rundir = rundir
        self.uri = f"local://{rundir}/local-0"
        self.proc = subprocess.Popen(
            # the initial program starts once rc1 has loaded every module: then the instance takes jobs
            [str(flux), "start", "--test-size=2", f"--test-rundir={rundir}", "sh", "-c", RUN_THEN_IDLE, rundir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        wait_for(lambda: (rundir / "running").exists(), timeout=30)
        env = dict(os.environ, FLUX_URI=self.uri)
        subprocess.run(
            [str(flux), "overlay", "status", "--wait=full", "--timeout=30"], env=env, check=True, capture_output=True
        )

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def instance(flux_core: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealInstance]:
    rundir = Path(tmp_path_factory.mktemp("fx", numbered=True))
    real = RealInstance(flux_core.flux, rundir)
    try:
        yield real
    finally:
        real.stop()


@pytest.fixture
def service(bindings: Any, instance: RealInstance) -> FluxJobService:
    return FluxJobService(instance.uri)


def _finished(service: FluxJobService, jobid: int, timeout: float = 30.0) -> Any:
    wait_for(lambda: not service.info(jobid).active, timeout=timeout)
    return service.info(jobid)


def test_service_submit_info_list_output_cancel_nodes(
    service: FluxJobService, bindings: Any, instance: RealInstance
) -> None:
    request = parse_submit(
        {"command": "sh -c 'echo hello $GREETING; echo to stderr >&2'", "envars": "GREETING=hi",
         "option_flags": "cpu-affinity=off"}
    )  # fmt: skip
    jobid = service.submit(request, os.getuid())
    info = _finished(service, jobid)
    assert (info.id, info.state, info.result, info.returncode, info.success) == (
        jobid, "INACTIVE", "COMPLETED", 0, True,
    )  # fmt: skip
    assert (info.name, info.exception_type, info.nnodes, info.ntasks) == ("sh", "", 1, 1)
    assert info.nodelist and info.t_run >= info.t_submit > 0
    assert info.to_restful()["exception"] == {"occurred": False, "type": "", "note": ""}
    jobspec = bindings.job.job_kvs_lookup(bindings.Flux(instance.uri), jobid, keys=["jobspec"])["jobspec"]
    system = jobspec["attributes"]["system"]
    assert system["shell"]["options"]["cpu-affinity"] == "off" and system["cwd"] == os.getcwd()
    assert [j.id for j in service.jobs()] == [jobid]

    lines, offset, done = service.output(jobid)  # both streams (their relative order is the pipes')
    assert (sorted(lines), offset, done) == (["hello hi\n", "to stderr\n"], 2, True)
    secret = service.submit(parse_submit({"command": "sh -c 'echo ${FLUX_TOKEN:-unset}'"}), os.getuid())
    _finished(service, secret)
    assert service.output(secret)[0] == ["unset\n"]  # the server's credentials never reach a job
    assert service.output(jobid, 2) == ([], 2, True)

    sleeper = service.submit(parse_submit({"command": "sleep 100", "runtime": 60, "num_nodes": 2}), os.getuid())
    wait_for(lambda: service.info(sleeper).state == "RUN", timeout=30)
    assert service.info(sleeper).nnodes == 2 and service.info(sleeper).duration == 60.0
    service.cancel(sleeper)
    canceled = _finished(service, sleeper)
    assert (canceled.state, canceled.result) == ("INACTIVE", "CANCELED") and canceled.returncode != 0
    assert (canceled.exception_type, canceled.exception_note) == ("cancel", "canceled through the REST API")
    with pytest.raises(FluxError) as again:
        service.cancel(sleeper)
    assert again.value.errnum == errno.EINVAL and "inactive" in again.value.message

    assert len(service.nodes()) == 2  # both brokers up (test instances share this machine's hostname)
    service.shutdown()
    assert instance.proc.wait(timeout=30) is not None  # the instance really went away
    service.close()


def test_service_unknown_jobs_are_enoent(service: FluxJobService) -> None:
    for call in (service.info, service.cancel, service.output):
        with pytest.raises(FluxError) as caught:
            call(12345)
        assert caught.value.errnum == errno.ENOENT


def test_service_refuses_other_users_and_bad_requests(service: FluxJobService) -> None:
    with pytest.raises(FluxError) as other:
        service.submit(SubmitRequest(command=["true"]), os.getuid() + 1)
    assert other.value.errnum == errno.EPERM and "flux-security" in other.value.message
    with pytest.raises(FluxError) as bad:
        service.submit(SubmitRequest(command=["true"], exclusive=True), os.getuid())  # no node count
    assert bad.value.errnum == errno.EINVAL and "exclusive" in bad.value.message
    assert service.jobs() == []


def test_service_output_holds_partial_lines_until_the_job_ends(service: FluxJobService, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = f'printf "one\\ntw"; while [ ! -e {gate} ]; do sleep 0.05; done; printf "o\\nthree"'
    jobid = service.submit(SubmitRequest(command=["sh", "-c", script]), os.getuid())
    assert wait_for(lambda: service.output(jobid) == (["one\n"], 1, False), timeout=30)
    assert service.output(jobid, 1) == ([], 1, False)  # "tw" is held back: not a whole line yet
    gate.touch()
    lines, offset, done = service.output(jobid, 1, wait=True)
    while not done:
        more, offset, done = service.output(jobid, offset, wait=True)
        lines += more
    assert (lines, offset) == (["two\n", "three"], 3)


def test_connection_errors_are_flux_errors(bindings: Any, tmp_path: Path) -> None:
    with pytest.raises(FluxError) as caught:
        FluxJobService(f"local://{tmp_path}/nowhere").jobs()
    assert caught.value.errnum == errno.ENOENT and "cannot connect" in caught.value.message


def test_job_info_from_list_agrees_with_flux_s_own_job_info(
    service: FluxJobService, bindings: Any, instance: RealInstance
) -> None:
    """Our mapping of job-list's raw records (fast) says what flux.job.JobInfo (slow) says, for jobs of every kind:
    done, failed, killed by a signal, canceled while held, running, pending, and a bare record
    with nothing known yet (flux reports unset numbers as "")."""
    handle = bindings.Flux(instance.uri)

    def submit(command: str, **kwargs: Any) -> int:
        return service.submit(parse_submit({"command": command, **kwargs}), os.getuid())

    done, failed, killed = submit("true"), submit("sh -c 'exit 3'"), submit("sh -c 'kill -9 $$'")
    for jobid in (done, failed, killed):
        _finished(service, jobid)
    running = submit("sleep 300", num_nodes=2, num_tasks=2, exclusive=True)
    wait_for(lambda: service.info(running).state == "RUN", timeout=30)
    pending = submit("true")
    held = int(bindings.job.submit(handle, bindings.job.JobspecV1.from_command(["true"]), urgency=0))
    service.cancel(held)
    _finished(service, held)
    records = bindings.job.job_list(handle, userid=bindings.constants.FLUX_USERID_UNKNOWN).get_jobs()
    records.append({"id": 7, "userid": 5, "urgency": 16, "t_submit": 1.0, "state": 8})
    assert {r["id"] for r in records} >= {done, failed, killed, running, pending, held}

    def blank(value: Any) -> Any:
        return None if value == "" else value

    for record in records:
        ours = job_info_from_list(cast(FluxJobRecord, dict(record)))  # flux-core's JSON, as the handle casts it
        theirs = bindings.job.JobInfo(dict(record)).to_dict(filtered=False)
        exception = theirs["exception"]
        assert (ours.state, ours.result, ours.returncode, ours.waitstatus) == (
            theirs["state"], theirs["result"], blank(theirs["returncode"]), blank(theirs["waitstatus"]),
        ), record  # fmt: skip
        assert (ours.nnodes, ours.ntasks, ours.ncores, ours.priority) == tuple(
            blank(theirs[k]) or 0 for k in ("nnodes", "ntasks", "ncores", "priority")
        ), record
        assert (ours.name, ours.nodelist, ours.ranks, ours.cwd, ours.duration) == (
            theirs["name"], theirs["nodelist"], theirs["ranks"], theirs["cwd"], theirs["duration"],
        ), record  # fmt: skip
        assert (ours.exception_type, ours.exception_note) == (
            (exception["type"], exception["note"]) if exception["occurred"] else ("", "")
        ), record
        assert abs(ours.runtime - theirs["runtime"]) < 1.0, record  # a running job's runtime grows meanwhile
    by_id = {r["id"]: job_info_from_list(cast(FluxJobRecord, dict(r))) for r in records}
    # a task killed by SIGKILL: the job shell exits 128+9; a job canceled before it ran: -128, as flux says
    assert (by_id[failed].returncode, by_id[killed].returncode, by_id[held].returncode) == (3, 137, -128)
    assert by_id[running].state == "RUN" and by_id[running].returncode is None and by_id[7].state == "SCHED"
    service.cancel(running)


def test_rest_api_over_the_flux_flavour(service: FluxJobService, instance: RealInstance, tmp_path: Path) -> None:
    settings = RestSettings(state_dir=tmp_path, require_auth=False, token_signing_key="k" * 40)
    client = TestClient(create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4)))

    reply = client.post("/v1/jobs/submit", json={"command": "sh -c 'echo via rest; echo to stderr >&2'"})
    assert reply.status_code == 200, reply.text
    jobid = reply.json()["id"]
    _finished(service, jobid)
    job = client.get(f"/v1/jobs/{jobid}").json()
    assert (job["state"], job["result"], job["returncode"]) == ("INACTIVE", "COMPLETED", 0)
    assert [j["id"] for j in client.get("/v1/jobs", params={"detailed": True}).json()["jobs"]] == [jobid]
    assert sorted(client.get(f"/v1/jobs/{jobid}/output").json()["Output"]) == ["to stderr\n", "via rest\n"]
    streamed = client.get(f"/v1/jobs/{jobid}/output/stream").text
    assert sorted(streamed.splitlines(keepends=True)) == ["to stderr\n", "via rest\n"]
    page = client.get(f"/jobs/{jobid}")  # the web page over flux-core: fields, flux's own eventlog, output
    assert page.status_code == 200 and 'data-field="result">COMPLETED' in page.text and "via rest" in page.text
    for event in ("submit", "alloc", "start", "finish", "clean"):
        assert f"<td>{event}</td>" in page.text, event
    assert f'data-job="{service.info(jobid).f58}"' in client.get("/jobs").text
    assert "nodes up" in client.get("/cluster").text  # no resource.cpu on flux-core: the up nodes only

    two = client.post("/v1/jobs/submit", json={"command": "hostname", "num_nodes": 2, "num_tasks": 2}).json()["id"]
    assert _finished(service, two).nnodes == 2
    assert len(client.get(f"/v1/jobs/{two}/output").json()["Output"]) == 2  # one line per broker

    sleeper = client.post("/v1/jobs/submit", json={"command": "sleep 100"}).json()["id"]
    wait_for(lambda: service.info(sleeper).state == "RUN", timeout=30)
    assert client.post(f"/v1/jobs/{sleeper}/cancel").status_code == 200
    _finished(service, sleeper)
    assert client.get(f"/v1/jobs/{sleeper}").json()["result"] == "CANCELED"
    assert client.post(f"/v1/jobs/{sleeper}/cancel").status_code == 400  # already inactive

    assert client.get("/v1/nodes").json()["nodes"] == list(dict.fromkeys(service.nodes()))  # each host once
    assert client.get("/v1/jobs/123456").status_code == 404
    assert client.post("/v1/jobs/123456/cancel").status_code == 400  # as the reference server answers
    assert "Message" in client.get("/v1/jobs/123456/output").json()  # 200 with a Message, as the reference
    assert client.post("/v1/service/stop").status_code == 200
    assert instance.proc.wait(timeout=30) is not None


def test_rest_api_flux_flavour_refuses_multi_user_submission(service: FluxJobService, tmp_path: Path) -> None:
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
    assert service.jobs() == []


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


def test_tenants_over_the_flux_flavour_managed_from_inside_the_lead_pod(
    service: FluxJobService, bindings: Any, instance: RealInstance, tmp_path: Path
) -> None:
    """Users added and removed with the in-pod tool (the `flux` here is flux-core's); each sees only their own jobs,
    whose owner is read back from the jobspec in flux-core's KVS; removal revokes a token already issued."""
    state = tmp_path / "restful"
    settings = RestSettings(
        state_dir=state, mode="multi-user", superuser="admin", superuser_password="admin-pw", token_signing_key="k" * 40
    )
    client = TestClient(create_app(settings, service, UserStore(state / "users.db", rounds=4)))

    def tool(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "broker.rest.users_admin", *args, "--state-dir", str(state)]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)

    for name in ("alice", "bob"):
        added = tool("add", name, "--password-stdin", stdin=f"{name}-pw\n")
        assert added.returncode == 0 and f"added user {name}" in added.stdout, added.stderr
    assert tool("add", "alice", "--password-stdin", stdin="x\n").returncode == 2  # exists: nothing changed
    bad = tool("add", "a:b", "--password-stdin", stdin="x\n")
    assert bad.returncode == 2 and "name 'a:b'" in bad.stderr
    token = client.post("/v1/token", auth=("alice", "alice-pw")).json()["access_token"]
    alice = {"Authorization": f"Bearer {token}"}

    hers = client.post("/v1/jobs/submit", json={"command": "true"}, headers=alice).json()["id"]
    admins = client.post("/v1/jobs/submit", json={"command": "true"}, auth=("admin", "admin-pw")).json()["id"]
    _finished(service, hers)
    _finished(service, admins)
    spec = bindings.job.job_kvs_lookup(bindings.Flux(instance.uri), hers, keys=["jobspec"])["jobspec"]
    assert spec["attributes"]["system"]["miniclusters"] == {"owner": "alice"}  # recorded in flux-core's jobspec
    assert [j["id"] for j in client.get("/v1/jobs", headers=alice).json()["jobs"]] == [hers]
    assert {hers, admins} <= {j["id"] for j in client.get("/v1/jobs", auth=("admin", "admin-pw")).json()["jobs"]}
    theirs = client.get(f"/v1/jobs/{hers}", auth=("bob", "bob-pw"))
    missing = client.get("/v1/jobs/123456789", auth=("bob", "bob-pw"))
    assert theirs.status_code == missing.status_code == 404  # bob: as if alice's job did not exist
    assert theirs.json() == {"detail": f"there is no job {hers}"} and missing.json() == {
        "detail": "there is no job 123456789"
    }
    assert client.get(f"/v1/jobs/{admins}", headers=alice).status_code == 404

    listed = json.loads(tool("list", "--json").stdout)["users"]
    assert [u["name"] for u in listed] == ["admin", "alice", "bob"] and listed[0]["superuser"]
    assert tool("remove", "alice").returncode == 0
    revoked = client.get("/v1/jobs", headers=alice)
    assert revoked.status_code == 401 and revoked.json()["detail"] == "the token's user no longer exists"
    gone = tool("remove", "alice")
    assert gone.returncode == 1 and "no user 'alice'" in gone.stderr


def test_gpus_per_task_is_refused_at_submit_on_an_instance_without_gpus(
    service: FluxJobService, tmp_path: Path
) -> None:
    """flux-core would take the job and never run it; we refuse it, naming the field."""
    with pytest.raises(SubmitError) as caught:
        service.submit(parse_submit({"command": "true", "gpus_per_task": 1}), os.getuid())
    assert caught.value.errors[0].startswith("gpus_per_task: this cluster has no GPUs")
    settings = RestSettings(state_dir=tmp_path, require_auth=False, token_signing_key="k" * 40)
    client = TestClient(create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4)))
    reply = client.post("/v1/jobs/submit", json={"command": "true", "gpus_per_task": 2})
    assert reply.status_code == 400 and reply.json()["Errors"][0].startswith("gpus_per_task:"), reply.text
    assert service.jobs() == []  # nothing was submitted


def test_a_deeply_nested_body_is_400_over_the_flux_flavour(service: FluxJobService, tmp_path: Path) -> None:
    """Before: 500 (RecursionError) from 1,000 levels, as on the built-in broker (issue 41)."""
    import httpx

    from broker.rest.testing import serve_app

    settings = RestSettings(state_dir=tmp_path, require_auth=False, token_signing_key="k" * 40)
    with serve_app(create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4))) as url:
        for depth in (64, 1000, 100_000):
            body = '{"command": "true", "envars": ' + "[" * depth + "]" * depth + "}"
            reply = httpx.post(
                f"{url}/v1/jobs/submit", content=body, headers={"content-type": "application/json"}, timeout=30
            )
            assert reply.status_code == 400, reply.text[:300]
            assert reply.json()["Errors"] == ["body: JSON nested deeper than 64 levels (arrays and objects)"]
        assert httpx.post(f"{url}/v1/jobs/submit", json={"command": "true"}, timeout=30).status_code == 200
    assert len(service.jobs()) == 1  # the one shallow submit only


def test_listings_read_owners_only_when_needed_and_all_at_once(
    service: FluxJobService, bindings: Any, instance: RealInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The superuser's detailed listing reads no jobspec (the reference reads none either); a tenant's listing
    reads each unknown owner once, every request in flight before the first answer is awaited."""
    handle = bindings.Flux(instance.uri)
    inside = [
        int(bindings.job.submit(handle, bindings.job.JobspecV1.from_command(["true"]), waitable=False))
        for _ in range(4)
    ]  # submitted inside the pod (`flux submit`): owned by nobody in the API's eyes
    settings = RestSettings(
        state_dir=tmp_path,
        mode="multi-user",
        superuser="admin",
        superuser_password="admin-pw",
        token_signing_key="k" * 40,
    )
    users = UserStore(tmp_path / "users.db", rounds=4)
    users.add("alice", "alice-pw")
    client = TestClient(create_app(settings, service, users))
    hers = client.post("/v1/jobs/submit", json={"command": "true"}, auth=("alice", "alice-pw")).json()["id"]

    reads: list[int] = []
    steps: list[str] = []  # "send" and "answer", in the order they happen
    lookup = bindings.job.job_info_lookup

    def counted(flux_handle: Any, jobid: int, *args: Any, **kwargs: Any) -> Any:
        reads.append(int(jobid))
        steps.append("send")
        future = lookup(flux_handle, jobid, *args, **kwargs)
        get_decode = future.get_decode

        def answer() -> Any:
            steps.append("answer")
            return get_decode()

        future.get_decode = answer
        return future

    monkeypatch.setattr(bindings.job, "job_info_lookup", counted)
    monkeypatch.setattr(bindings.job, "job_kvs_lookup", lambda *a, **k: pytest.fail("one jobspec read at a time"))
    listing = client.get("/v1/jobs", params={"details": "true", "listing": "true"}, auth=("admin", "admin-pw"))
    assert listing.status_code == 200 and {j["id"] for j in listing.json()} == {*inside, hers}
    assert reads == []  # the superuser sees everything: no owner needed, no jobspec read

    mine = client.get("/v1/jobs", auth=("alice", "alice-pw")).json()["jobs"]
    assert [j["id"] for j in mine] == [hers]
    assert sorted(reads) == sorted(inside)  # hers was remembered at submit; the others read once each...
    assert steps == ["send"] * 4 + ["answer"] * 4  # ...every request sent before the first answer is read
    client.get("/v1/jobs", auth=("alice", "alice-pw"))
    assert len(reads) == 4  # and remembered


def test_the_listing_cap_is_job_list_s_unless_asked_otherwise(service: FluxJobService, tmp_path: Path) -> None:
    for _ in range(3):
        service.submit(parse_submit({"command": "true"}), os.getuid())
    assert len(service.jobs()) == 3 and len(service.jobs(limit=2)) == 2
    settings = RestSettings(state_dir=tmp_path, require_auth=False, token_signing_key="k" * 40)
    client = TestClient(create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4)))
    assert len(client.get("/v1/jobs", params={"limit": 2}).json()["jobs"]) == 2


def test_a_submit_held_in_flux_core_does_not_delay_a_get(
    service: FluxJobService, bindings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delay injected into the handle's submit call; a GET of another job is answered meanwhile."""
    import threading

    import httpx

    from broker.rest.testing import serve_app

    done = service.submit(parse_submit({"command": "true"}), os.getuid())
    entered, release = threading.Event(), threading.Event()
    submit = bindings.job.submit

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(30)
        return submit(*args, **kwargs)

    monkeypatch.setattr(bindings.job, "submit", held)
    settings = RestSettings(state_dir=tmp_path, require_auth=False, token_signing_key="k" * 40)
    with serve_app(create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4))) as url:
        answers: list[httpx.Response] = []
        slow = threading.Thread(
            target=lambda: answers.append(httpx.post(f"{url}/v1/jobs/submit", json={"command": "true"}, timeout=60))
        )
        slow.start()
        try:
            assert entered.wait(30)
            got = httpx.get(f"{url}/v1/jobs/{done}", timeout=60)  # the submit is held until this is answered
            assert got.status_code == 200 and got.json()["id"] == done
            assert slow.is_alive() and not answers, "a GET waited for a held submit"
        finally:
            release.set()
            slow.join(timeout=60)
        assert answers and answers[0].status_code == 200, answers and answers[0].text


def test_one_job_is_read_on_the_event_loop_not_in_a_worker_thread(
    service: FluxJobService, bindings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocking path (flux.job.job_list_id in a worker thread) is counted: a GET of one job does not take
    it, and says what the blocking path says."""
    import httpx

    from broker.rest.testing import serve_app

    done = service.submit(parse_submit({"command": "true"}), os.getuid())
    blocking = _finished(service, done)
    list_id = bindings.job.job_list_id

    blocking_reads: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        blocking_reads.append(1)
        return list_id(*args, **kwargs)

    monkeypatch.setattr(bindings.job, "job_list_id", counted)
    settings = RestSettings(state_dir=tmp_path, require_auth=False, token_signing_key="k" * 40)
    with serve_app(create_app(settings, service, UserStore(tmp_path / "users.db", rounds=4))) as url:
        got = httpx.get(f"{url}/v1/jobs/{done}", timeout=10)
        assert got.status_code == 200 and not blocking_reads, got.text  # not through the blocking path
        missing = httpx.get(f"{url}/v1/jobs/{done + 1}", timeout=10)
    job = got.json()
    assert (job["id"], job["state"], job["result"], job["returncode"]) == (done, "INACTIVE", "COMPLETED", 0)
    assert (job["nnodes"], job["ntasks"], job["t_submit"]) == (blocking.nnodes, blocking.ntasks, blocking.t_submit)
    assert missing.status_code == 404 and f"no job {done + 1}" in missing.text


LATE_COMMITS = 40


def _kvs_commit(flux: Any, uri: str) -> None:
    handle = flux.Flux(uri)
    for value in range(LATE_COMMITS):
        flux.kvs.put(handle, "test.late", value)
        flux.kvs.commit(handle)


def test_the_loop_handle_times_out_answers_errors_and_keeps_working(
    service: FluxJobService, instance: RealInstance
) -> None:
    """A request flux-core holds (the KVS waiting for a root version 40 commits ahead) times out with ETIMEDOUT; an
    unknown topic is ENOSYS; the handle goes on answering afterwards, a late answer never reaching a new request."""
    import asyncio

    from broker.rest.async_flux import AsyncFluxHandle

    done = service.submit(parse_submit({"command": "true"}), os.getuid())
    _finished(service, done)

    async def scenario() -> tuple[int, int, list[int]]:
        handle = AsyncFluxHandle(service.flux, instance.uri)
        try:
            # kvs RPCs the REST server never sends (beyond its Request shapes, on purpose): they make a late answer
            getroot = cast(Request, {"namespace": "primary", "flags": 0})
            root = await handle.rpc(Topic[KvsRoot]("kvs.getroot"), getroot)
            ahead = root["rootseq"] + LATE_COMMITS  # beyond what the instance commits by itself meanwhile
            with pytest.raises(FluxError) as held:  # answered once we have committed that often: late
                await handle.rpc(
                    Topic[KvsRoot]("kvs.wait-version"), cast(Request, {"rootseq": ahead, "namespace": "primary"}), 0.3
                )
            assert len(handle._orphaned) == 1  # its tag stays taken until the late answer comes
            await asyncio.to_thread(_kvs_commit, service.flux, instance.uri)
            with pytest.raises(FluxError) as unknown:
                await handle.rpc(Topic("no-such-service.ping"), {}, timeout=5)
            answers = await asyncio.gather(
                *(handle.rpc(LIST_ID, {"id": done, "attrs": ["state"]}, timeout=5) for _ in range(20))
            )

            async def freed() -> bool:  # the late answer may come after the others: each round trip reads what came
                if handle._orphaned:
                    await handle.rpc(LIST_ID, {"id": done, "attrs": ["state"]}, timeout=5)
                return not handle._orphaned

            # the late answer came, was dropped, and freed its tag
            await async_wait_until_answered("the late answer frees its tag", freed, timeout=10)
            return held.value.errnum, unknown.value.errnum, [int(a["job"]["id"]) for a in answers]
        finally:
            handle.close()

    timed_out, no_service, ids = asyncio.run(scenario())
    assert timed_out == errno.ETIMEDOUT and no_service == errno.ENOSYS
    assert ids == [done] * 20
