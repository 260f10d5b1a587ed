"""/cluster on a real instance: ranks and their cgroup CPU, a real PMPI profile, the controllers' timelines."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import httpx
import pytest

from broker.payloads import ResourceStatus
from broker.rest.answers import CpuReading
from broker.rest.client import RestClient
from broker.rest.testing import SUPERUSER, Server, start_server
from broker.rest.web.cluster_data import ClusterReader, rank_rows, used_millicores
from broker.rest.web.testing import FormClient, sign_in
from broker.testing import LOOPBACK_MPI_ENV
from elasticity.control.events import EventLog
from elasticity.model.cpu import weight_to_milli
from elasticity.profiling.duty_cycle import analyze_job
from elasticity.profiling.trace import read_job_traces
from tests.waiting import wait_until

SPIN = Path(__file__).resolve().parents[1] / "elasticity" / "data" / "spin_mpi.c"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from start_server(tmp_path_factory.mktemp("web-cluster"), size=2, **LOOPBACK_MPI_ENV)


@pytest.fixture
def browser_like(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, follow_redirects=False, timeout=60) as client:
        sign_in(cast(FormClient, client), *SUPERUSER)  # httpx's keyword-only get/post, as the form needs them
        yield client


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_ranks_and_their_cpu_come_from_each_rank_s_resource_cpu(browser_like: httpx.Client) -> None:
    page = browser_like.get("/cluster")
    assert page.status_code == 200
    rows = re.findall(r'<tr data-rank="(\d)">(.*?)</tr>', page.text, re.S)
    assert [rank for rank, _ in rows] == ["0", "1"]
    for _, row in rows:
        assert ">up<" in row
        requested = re.search(r'data-cpu="requested">(\d+)m', row)
        used = re.search(r'data-cpu="used">(\d+)m', row)
        assert requested and used, row  # both read from the rank's cgroup (this test instance: the machine's)
    assert "2 of 2 ranks up" in _text(page.text)


def test_the_last_pmpi_profile_is_found_through_the_job_s_options_and_drawn(
    server: Server, browser_like: httpx.Client, tmp_path: Path
) -> None:
    exe = tmp_path / "spin_mpi"
    subprocess.run(["mpicc", "-O2", "-o", str(exe), str(SPIN)], check=True, timeout=120)
    traces = tmp_path / "traces"
    with RestClient(server.url, user=SUPERUSER[0], token=SUPERUSER[1], secret_key="") as client:
        jobid = client.submit(
            f"{exe} 12 2000",
            num_tasks=4,
            num_nodes=2,
            option_flags=f"mpi=openmpi,pmpi=1,pmpi-dir={traces}",
            workdir=str(tmp_path),
        )
        wait_until("the profiled job ends", lambda: client.job(jobid)["state"] == "INACTIVE", timeout=120, interval=0.3)
        assert client.job(jobid)["result"] == "COMPLETED", client.output(jobid)
    page = browser_like.get("/cluster").text
    section = page[page.index('id="profile-heading"') : page.index('id="controllers-heading"')]
    duties = [float(d) for d in re.findall(r"<td>(\d\.\d\d)</td>", section)]
    assert len(duties) == 4 and str(traces) in section
    expected = analyze_job(read_job_traces(traces, jobid=str(jobid))).duty
    assert duties == [round(float(d), 2) for d in expected]  # the page shows the job's own traces' duty cycles
    image = re.search(r'src="(/cluster/profile/[^"]+\.png)"', section)
    assert image
    png = browser_like.get(image.group(1))
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


def test_controller_timelines_show_when_their_event_logs_exist(server: Server, browser_like: httpx.Client) -> None:
    assert "No multiplexing, autoscaling or campaign controller" in browser_like.get("/cluster").text
    assert browser_like.get("/cluster/figures/autoscale.png").status_code == 404
    controllers = server.statedir / "restful" / "controllers"
    clock = iter(range(100)).__next__
    with EventLog(controllers / "autoscale.jsonl", "autoscale", lambda: float(clock())) as log:
        for size, pending in ((1, 3), (3, 1), (3, 0), (2, 0)):
            log.write("sample", "c", size=size, wanted=size, busy=1, pending=pending, running=1)
    with (controllers / "multiplex.jsonl").open("w") as out:
        out.write('{"t": 0, "event": "controller-start", "total_m": 2000, "allocatable_m": 4000}\n')
        out.write('{"t": 1, "event": "submitted", "sim": "sim-1"}\n{"t": 2, "event": "running", "sim": "sim-1"}\n')
        out.write('{"t": 5, "event": "profiled", "sim": "sim-1"}\n{"t": 6, "event": "resize", "total_m": 1500}\n')
    page = _text(browser_like.get("/cluster").text)
    assert "Multiplexing" in page and "Autoscaling" in page and "Last event: sample (c)" in page
    for name in ("autoscale", "multiplex"):
        png = browser_like.get(f"/cluster/figures/{name}.png")
        assert png.status_code == 200 and png.content.startswith(b"\x89PNG"), name
    assert browser_like.get("/cluster/figures/other.png").status_code == 404


def test_a_campaign_shows_its_members_and_timeline(server: Server, browser_like: httpx.Client) -> None:
    controllers = server.statedir / "restful" / "controllers"
    clock = iter(range(100)).__next__
    with EventLog(controllers / "campaign.jsonl", "campaign", lambda: float(clock())) as log:
        log.write("submitted", "c", t=0.0, ensemble="alpha", job="f1", members=2)
        log.write("ensemble-running", "c", t=1.0, ensemble="alpha", pods=[0])
        log.write("member", "c", t=2.0, ensemble="alpha", member="alpha-0", state="running")
        log.write(
            "member", "c", t=4.0, ensemble="alpha", member="alpha-0", state="running", duty=[0.1, 0.3], pods=[0, 0]
        )
        log.write("member", "c", t=2.5, ensemble="alpha", member="alpha-1", state="running")
        log.write("member", "c", t=6.0, ensemble="alpha", member="alpha-1", state="failed")
        for t, requested in ((1.0, 1000), (5.0, 300)):
            log.write("sample", "c", t=t, size=1, requested_m=requested, allocatable_m=2000, pods={"0": requested})
        log.write("resize", "c", t=4.5, pod=0, outcome="done", cpu_requested=300)
    page = browser_like.get("/cluster").text
    rows = dict(re.findall(r'<tr data-member="([^"]+)">(.*?)</tr>', page, re.S))
    assert sorted(rows) == ["alpha-0", "alpha-1"]
    assert "<td>running</td><td>0.2</td><td>0</td>" in rows["alpha-0"]  # mean of the ranks' duty cycles, its pod
    assert "<td>failed</td>" in rows["alpha-1"]
    png = browser_like.get("/cluster/figures/campaign.png")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


def test_cpu_in_use_is_a_rate_between_two_reports() -> None:
    before: CpuReading = {"usage_usec": 1_000_000, "time": 10.0}
    assert used_millicores(before, {"usage_usec": 1_750_000, "time": 11.0}) == 750
    assert used_millicores(before, {"time": 11.0}) is None
    # only the keys the page reads (no R, no down list)
    status = cast(ResourceStatus, {"hostnames": ["p-0", "p-1", "p-2"], "up": "0-1", "reports": {"0": {"ncores": 2}}})
    report: CpuReading = {"knob": "cpu.shares", "weight": 512, "usage_usec": 1_500_000, "time": 11.0, "cgroup": "/x"}
    now = {0: report}
    rows = rank_rows(status, now, {0: before})
    assert [(r.hostname, r.up, r.request_m, r.used_m) for r in rows] == [
        ("p-0", True, 500, 500),
        ("p-1", True, None, None),
        ("p-2", False, None, None),
    ]
    assert rows[1].note == "no CPU cgroup readable"


def test_a_rank_that_cannot_answer_is_named_not_fatal() -> None:
    def rpc(topic: str, rank: int) -> CpuReading:
        if rank == 1:
            raise OSError("no such service")
        return {"knob": "cpu.weight", "weight": 100, "usage_usec": 0, "time": time.monotonic(), "cgroup": "/y"}

    reader = ClusterReader(lambda: cast(ResourceStatus, {"hostnames": ["a", "b"], "up": "0-1"}), rpc)  # keys read
    rows = reader.rows()
    assert rows[0].request_m == weight_to_milli(100) and rows[0].used_m == 0  # cgroup v2's default weight
    assert "no such service" in rows[1].note


def test_a_drained_rank_shows_as_drained_with_its_reason(server: Server, browser_like: httpx.Client) -> None:
    drain = subprocess.run(
        [*server.flux_command, "resource", "drain", "1", "maintenance window"], capture_output=True, text=True
    )
    assert drain.returncode == 0, drain.stderr
    try:
        page = browser_like.get("/cluster").text
        rows = dict(re.findall(r'<tr data-rank="(\d)">(.*?)</tr>', page, re.S))
        assert "drained" in rows["1"] and "maintenance window" in rows["1"]
        assert "drained" not in rows["0"]
        assert "1 drained" in _text(page)
    finally:
        subprocess.run([*server.flux_command, "resource", "undrain", "1"], capture_output=True, text=True)
    rows = dict(re.findall(r'<tr data-rank="(\d)">(.*?)</tr>', browser_like.get("/cluster").text, re.S))
    assert "drained" not in rows["1"]
