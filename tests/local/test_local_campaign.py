"""A real campaign on this machine: rhoSimpleFoam members inside `flux batch` sub-instances, the cluster growing
from one pod for the waiting ensemble, pods resized from PMPI duty cycles, Cl/Cd and both PNGs at the end; a
member with a broken case fails alone; `minicluster down` mid-campaign cancels everything and leaves no process.

Small on purpose (2 iterations, 2 members per ensemble) so CI can afford it; examples/naca0012-campaign.yaml is
the full-size run (docs/campaign.md)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.testing import require_tool
from elasticity.control.events import read_events
from miniclusters.api import load_minicluster
from miniclusters.backends.base import CreateOptions
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.campaign import session, state_file
from miniclusters.render import RenderOptions
from miniclusters.testing.pod_processes import broker_of

MINICLUSTER = str(Path(sys.executable).with_name("minicluster"))

pytestmark = pytest.mark.needs_root


def _spec(
    directory: Path, name: str, members: int = 2, iterations: int = 2, loops: bool = True, cpu: str = "1"
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 1,
            "maxSize": 2,
            "containers": [{"image": "local", "resources": {"requests": {"cpu": cpu}}}],
            "autoscale": {"enabled": loops, "idleSeconds": 2, "cooldownSeconds": 1, "intervalSeconds": 1},
            "multiplexing": {"enabled": loops},
            "campaign": {
                "iterations": iterations,
                "ranks": 2,
                "weights": [1, 3],
                "profileIterations": 200,
                "workdir": str(directory / "work"),
                "ensembles": [
                    {"name": "alpha", "parameter": "angleOfAttack", "values": [0, 6, 3][:members]},
                    {"name": "mach", "parameter": "mach", "values": [0.5, 0.7, 0.6][:members]},
                ],
            },
        },
    }
    return data


def _write(directory: Path, data: dict[str, Any]) -> Path:
    path = directory / f"{data['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(autouse=True)
def _openfoam() -> None:
    require_tool("rhoSimpleFoam", "openfoam openfoam-examples")


def test_campaign_grows_resizes_and_reports_cl_cd(
    machine: Any, mc: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    # 1500m per pod: two pods would request more than the machine's 2 CPUs, so the loops disagree on growing
    spec = _write(tmp_path, _spec(tmp_path, "camp-e2e", cpu="1500m"))
    result = mc("up", str(spec), timeout=400)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    assert "campaign done: 4/4 members completed with Cl/Cd" in result.stdout
    work = tmp_path / "work"
    report = json.loads((work / "report.json").read_text())
    members = {m["member"]: m for m in report["members"]}
    assert sorted(members) == ["alpha-0", "alpha-1", "mach-0", "mach-1"]
    assert all(m["state"] == "done" and m["iterations"] == 2 for m in members.values()), members
    assert all(isinstance(m["cl"], float) and isinstance(m["cd"], float) for m in members.values())
    assert members["alpha-1"]["cl"] > members["alpha-0"]["cl"]  # 6 degrees lifts more than 0
    assert all(0 < m["mean_duty"] <= 1 for m in members.values())  # every member was profiled
    ensembles = {e["ensemble"]: e for e in report["ensembles"]}
    assert {e["state"] for e in ensembles.values()} == {"done"}
    assert sorted(p for e in ensembles.values() for p in e["pods"]) == [0, 1]  # the second ran on the grown pod
    assert all(e["restarts"] == 0 for e in ensembles.values())
    events = list(read_events(work / "events.jsonl"))
    scaled = [e for e in events if e["kind"] == "scaled"]
    assert scaled[0]["previous"] == 1 and scaled[0]["size"] == 2  # started at 1, grew for the waiting ensemble
    resized = [e for e in events if e["kind"] == "resize" and e["outcome"] != "deferred"]
    assert any(e["cpu_requested"] < 1000 for e in resized)  # a profiled pod was given less than its rigid 1500m
    disagreements = [e for e in events if e["kind"] == "disagreement"]
    assert disagreements, "growing to 2 pods of 1500m on 2 CPUs is a disagreement the plan must settle"
    assert disagreements[0]["winner"] == "autoscale" and "allocatable" in disagreements[0]["multiplex"]
    assert disagreements[0]["why"]
    assert (work / "polar.png").stat().st_size > 10_000 and (work / "timeline.png").stat().st_size > 10_000
    assert "alpha-1" in (work / "results.csv").read_text()
    results = mc("campaign", "results", "camp-e2e")
    assert results.returncode == 0 and "alpha-1" in results.stdout and "operations:" in results.stdout


def test_a_broken_member_fails_alone(machine: Any, tmp_path: Path) -> None:
    data = _spec(tmp_path, "camp-fault", loops=False)
    data["spec"]["campaign"]["ensembles"] = data["spec"]["campaign"]["ensembles"][:1]
    cluster = load_minicluster(data)
    plan = session.prepare(cluster, print)
    broken = plan.members[1]
    shutil.rmtree(broken.directory / "processor1")  # one rank has no mesh: the solver fails at start
    backend = LocalBackend(state_dir=machine.state_dir, notify=lambda _m: None)
    from miniclusters.cli.campaign_commands import _run_on_cluster

    interactive = cluster.model_copy(update={"spec": cluster.spec.model_copy(update={"interactive": True})})
    options = CreateOptions(render=RenderOptions(), timeout=120)
    code = _run_on_cluster(backend, interactive, options, plan, False, 300, print)
    assert code == 1  # not every member completed
    state = state_file.load_state("camp-fault") or {}
    members = {m["member"]: m for m in state["members"]}
    assert members["alpha-0"]["state"] == "done" and members["alpha-0"]["cl"] is not None
    assert members["alpha-1"]["state"] == "failed" and members["alpha-1"]["reason"].startswith("exit 1")
    assert state["ensemble_rows"][0]["state"] == "done" and state["ensemble_rows"][0]["members_ok"] == 1


def test_down_mid_campaign_cancels_everything(
    machine: Any, mc: Callable[..., subprocess.CompletedProcess[str]], waiter: Callable[..., Any], tmp_path: Path
) -> None:
    spec = _write(tmp_path, _spec(tmp_path, "camp-down", iterations=400))
    up = subprocess.Popen([MINICLUSTER, "up", str(spec)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:

        def running() -> bool:
            state = state_file.load_state("camp-down") or {}
            return any(m["state"] == "running" for e in state.get("ensembles", []) for m in e["members"])

        assert waiter(running, timeout=180), "no member started"
        status = mc("status", "camp-down")
        assert status.returncode == 0 and "campaign: running" in status.stdout, status.stdout
        down = mc("down", "camp-down", timeout=120)
        assert down.returncode == 0, down.stderr
        assert "cancelled the campaign" in down.stdout and "deleted MiniCluster camp-down" in down.stdout
        output, _ = up.communicate(timeout=60)
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGKILL)
    assert up.returncode != 0, output
    events = list(read_events(tmp_path / "work" / "events.jsonl"))
    assert {e["ensemble"] for e in events if e["kind"] == "ensemble-cancelled"} == {"alpha", "mach"}
    assert events[-1]["kind"] == "campaign-end" and events[-1]["state"] == "cancelled"
    # the machine fixture fails the test if any process (broker, mpirun, rhoSimpleFoam) was left behind


def test_killing_a_follower_mid_campaign_loses_no_member(
    machine: Any, backend: Any, waiter: Callable[..., Any], tmp_path: Path
) -> None:
    import os

    # long enough that the kill lands while mach runs on pod 1 (CI: with 40 it once came after mach was done)
    spec = _write(tmp_path, _spec(tmp_path, "camp-kill", iterations=120))
    env = {**os.environ, "MINICLUSTERS_LOCAL_RESTART_DELAY": "0.2"}
    up = subprocess.Popen(
        [MINICLUSTER, "up", str(spec)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:

        def on_follower() -> bool:
            state = state_file.load_state("camp-kill") or {}
            return any(
                e["pods"] == [1] and any(m["state"] == "running" for m in e["members"])
                for e in state.get("ensembles", [])
            )

        assert waiter(on_follower, timeout=180), "no ensemble ran on the follower"
        supervisor = backend.store.load("camp-kill").pods[1].pid
        broker = broker_of(supervisor)
        os.kill(broker, signal.SIGKILL)
        output, _ = up.communicate(timeout=400)
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGKILL)
    events = list(read_events(tmp_path / "work" / "events.jsonl"))
    reruns = [e for e in events if e["kind"] == "ensemble-rerun"]
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    states = {m["member"]: m["state"] for m in report["members"]}
    assert reruns and reruns[0]["ensemble"] == "mach", output[-3000:]
    assert set(reruns[0]["members"]) <= {"mach-0", "mach-1"}
    # every member either completed (rerun) or is reported failed with its reason: none is dropped
    assert states == {"alpha-0": "done", "alpha-1": "done", "mach-0": "done", "mach-1": "done"}, output[-3000:]
    assert up.returncode == 0, output[-3000:]


def _plant(files: dict[Path, str]) -> dict[Path, str]:
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


def _intact(files: dict[Path, str]) -> list[str]:
    return [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]


def test_files_outside_the_work_directory_survive_up_down_and_cancel(
    machine: Any, mc: Callable[..., subprocess.CompletedProcess[str]], waiter: Callable[..., Any], tmp_path: Path
) -> None:
    """Issue 41: the campaign writes and deletes only in a work directory of its own. Sentinels beside it (named
    like what it writes: events.jsonl, base/, alpha/alpha-0/) survive a whole run, `down` and `campaign cancel`;
    a would-be work directory holding someone's file is refused before anything starts, its file untouched."""
    sentinels = _plant({
        tmp_path / "events.jsonl": "the parent's log\n",
        tmp_path / "results.csv": "the parent's table\n",
        tmp_path / "base" / "thesis.tex": "chapter 1\n",
        tmp_path / "alpha" / "alpha-0" / "data.csv": "1,2\n",
        tmp_path / "neighbour" / "keep.dat": "a sibling's file\n",
    })  # fmt: skip
    theirs = _plant({tmp_path / "theirs" / "notes.txt": "someone's notes\n"})
    data = _spec(tmp_path, "camp-own", members=1, loops=False)
    data["spec"]["campaign"]["ensembles"] = data["spec"]["campaign"]["ensembles"][:1]
    data["spec"]["campaign"]["workdir"] = str(tmp_path / "theirs")
    refused = mc("up", str(_write(tmp_path, data)))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "spec.campaign.workdir" in refused.stderr and "not empty" in refused.stderr, refused.stderr
    assert _intact(theirs) == [] and sorted(p.name for p in (tmp_path / "theirs").iterdir()) == ["notes.txt"]
    assert mc("status", "camp-own").returncode != 0  # no cluster was started

    from miniclusters.workdirs import MARKER

    work = tmp_path / "work"
    data["spec"]["campaign"]["workdir"] = str(work)
    spec = _write(tmp_path, data)
    done = mc("up", str(spec), "--keep", timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (work / MARKER).is_file() and (work / "alpha" / "alpha-0" / "ended").is_file()
    assert _intact(sentinels) == []
    down = mc("down", "camp-own", timeout=120)
    assert down.returncode == 0, down.stderr
    assert not (machine.state_dir / "camp-own").exists()  # the lead's copy of the event log went with its pod
    assert _intact(sentinels) == [] and (work / "report.json").is_file()  # the work stays after down

    data["spec"]["campaign"]["iterations"] = 400  # long enough to cancel mid-run; the same (marked) directory
    spec = _write(tmp_path, data)
    up = subprocess.Popen([MINICLUSTER, "up", str(spec)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:

        def running() -> bool:
            state = state_file.load_state("camp-own") or {}
            return any(m["state"] == "running" for e in state.get("ensembles", []) for m in e["members"])

        assert waiter(running, timeout=180), "no member started"
        cancel = mc("campaign", "cancel", "camp-own", timeout=120)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        output, _ = up.communicate(timeout=120)
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGKILL)
    assert "deleted MiniCluster camp-own" in output, output[-3000:]
    assert _intact(sentinels) == [] and _intact(theirs) == []
    assert (work / MARKER).is_file()
