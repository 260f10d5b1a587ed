"""examples/naca0012-campaign.yaml on real containers: `minicluster up --backend podman` prepares the cases here,
mounts the work directory into every pod at the same path (a hostPath volume, pods played by a scale-up too),
runs each ensemble as a `flux batch` sub-instance in the openmpi-openfoam containers (OpenFOAM v1912) with the
autoscaler and the multiplexer on, and reports each member's Cl/Cd.

Short: the example's two sweeps cut to 2 + 1 members (60 iterations, so that mach waits while alpha runs).
Without podman, the images or OpenFOAM here (the cases are prepared on this machine) these skip; under CI they
fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from broker.testing import require_tool
from miniclusters.backends.podman.engine import CONTAINERS_CONF
from miniclusters.backends.podman.pods import network_name
from miniclusters.render import RenderOptions
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = RenderOptions()
MINICLUSTER = str(Path(sys.executable).parent / "minicluster")
IMAGE = f"{OPTIONS.registry}/openmpi-openfoam:{OPTIONS.tag}"


def podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(CONTAINERS_CONF))}
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def openfoam(images: None) -> None:
    """The cases are prepared on this machine: OpenFOAM is needed here too."""
    require_tool("rhoSimpleFoam", "openfoam openfoam-examples")


def leftovers(name: str) -> list[str]:
    found = [
        f"{kind} {n}"
        for kind in ("pod", "container", "volume")
        for n in podman(kind, "ls" if kind == "volume" else "ps", *(() if kind == "volume" else ("-a",)),
                        "--format", "{{.Name}}" if kind == "volume" else "{{.Names}}").stdout.split()
        if n.startswith(f"{name}-")
    ]  # fmt: skip
    if podman("network", "exists", network_name(name)).returncode == 0:
        found.append(f"network {network_name(name)}")
    return found


def test_naca0012_campaign_runs_in_containers(openfoam: None, tmp_path: Path) -> None:
    name = f"pmt-camp-{uuid.uuid4().hex[:6]}"
    spec = yaml.safe_load((ROOT / "examples" / "naca0012-campaign.yaml").read_text())
    spec["metadata"]["name"] = name
    workdir = tmp_path / "work"
    campaign = spec["spec"]["campaign"]
    campaign["workdir"] = str(workdir)
    campaign["iterations"] = 60  # alpha runs long enough for mach to wait: the cluster grows for it
    alpha, mach = campaign["ensembles"]
    campaign["ensembles"] = [{**alpha, "values": [0, 8]}, {**mach, "values": [0.5]}]
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "MINICLUSTERS_STATE_DIR": str(tmp_path / "state")}
    try:
        up = subprocess.run(
            [MINICLUSTER, "up", str(tmp_path / "campaign.yaml"), "--backend", "podman"],
            capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
        out = up.stdout + up.stderr
        assert up.returncode == 0, out
        assert "campaign done: 3/3 members completed with Cl/Cd" in out, out
    finally:
        subprocess.run([MINICLUSTER, "down", name, "--backend", "podman"], env=env, timeout=300, capture_output=True)
    # each ensemble a flux batch job of the lead; its members Flux jobs inside it (their ids recorded by the batch
    # script in the container, through the mounted work directory)
    events = [json.loads(line) for line in (workdir / "events.jsonl").read_text().splitlines()]
    assert [e["ensemble"] for e in events if e["kind"] == "submitted"] == ["alpha", "mach"], events
    pods = {e["ensemble"]: e["pods"] for e in events if e["kind"] == "ensemble-running"}
    report = json.loads((workdir / "report.json").read_text())
    members = {m["member"]: m for m in report["members"]}
    assert sorted(members) == ["alpha-0", "alpha-1", "mach-0"], report
    for member in members.values():
        assert member["state"] == "done" and member["iterations"] == campaign["iterations"], member
        assert 0 < member["cd"] < 1, member
        directory = workdir / member["ensemble"] / member["member"]
        assert (directory / "submitted").read_text().split()[0].startswith("ƒ"), member
        # the solver ran in its ensemble's pod (pod 1 only exists after a scale-up): OpenFOAM's banner names it
        log = (directory / "log.rhoSimpleFoam").read_text()
        (pod,) = pods[member["ensemble"]]
        assert f"Host   : {name}-{pod}" in log and "nProcs : 2" in log, log[:2000]
        # each rank's PMPI trace (the image's library) landed in the mounted directory
        assert len(list((directory / "pmpi").glob("pmpi.*.bin"))) == 2, member
    # physics, not copies: 8 degrees lifts more than 0
    assert members["alpha-1"]["cl"] > members["alpha-0"]["cl"] + 0.1, members
    assert all(e["restarts"] == 0 for e in report["ensembles"]) and (workdir / "polar.png").stat().st_size > 0
    resizes = [e for e in events if e["kind"] == "resize"]
    assert all(e["outcome"] == "done" for e in resizes), resizes  # podman update, when profiled in time
    scaled = [(e["previous"], e["size"]) for e in events if e["kind"] == "scaled"]
    assert scaled == [(1, 2), (2, 1)], scaled  # grown for the waiting ensemble (podman kube play), shrunk once done
    assert leftovers(name) == []


def _plant(files: dict[Path, str]) -> dict[Path, str]:
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


def _changed(files: dict[Path, str]) -> list[str]:
    return [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]


def test_podman_campaign_writes_only_in_its_work_directory(
    openfoam: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: only the work directory is mounted into the pods, and sentinels beside it (named like what the
    campaign writes) survive `up`, `down` and `campaign cancel`; a would-be work directory holding someone's file
    is refused before any pod starts."""
    from miniclusters.backends.podman.pods import container_name
    from miniclusters.campaign import state_file

    name = f"pmt-own-{uuid.uuid4().hex[:6]}"
    spec = yaml.safe_load((ROOT / "examples" / "naca0012-campaign.yaml").read_text())
    spec["metadata"]["name"] = name
    spec["spec"]["autoscale"] = {"enabled": False}
    spec["spec"]["multiplexing"] = {"enabled": False}
    campaign = spec["spec"]["campaign"]
    campaign["iterations"] = 3
    campaign["ensembles"] = [{**campaign["ensembles"][0], "values": [4]}]
    sentinels = _plant({
        tmp_path / "events.jsonl": "the parent's log\n",
        tmp_path / "base" / "thesis.tex": "chapter 1\n",
        tmp_path / "alpha" / "alpha-0" / "data.csv": "1,2\n",
        tmp_path / "neighbour" / "keep.dat": "a sibling's file\n",
    })  # fmt: skip
    theirs = _plant({tmp_path / "theirs" / "notes.txt": "someone's notes\n"})
    state = tmp_path / "state"
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(state))
    env = {**os.environ}

    def up(*extra: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(spec))
        argv = [MINICLUSTER, "up", str(tmp_path / "campaign.yaml"), "--backend", "podman", *extra]
        return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)

    def minicluster(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [MINICLUSTER, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)

    try:
        campaign["workdir"] = str(tmp_path / "theirs")
        refused = up()
        assert refused.returncode == 2 and "spec.campaign.workdir" in refused.stderr, refused.stdout + refused.stderr
        assert _changed(theirs) == [] and leftovers(name) == []  # refused before any pod

        work = tmp_path / "work"
        campaign["workdir"] = str(work)
        done = up("--keep")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        mounts = json.loads(podman("inspect", container_name(name, 0, name), "--format", "{{json .Mounts}}").stdout)
        own = str(state / "podman" / name / "files")  # the backend's ConfigMap and Secret files, read-only
        assert all(not m["RW"] for m in mounts if m["Source"].startswith(own)), mounts
        others = [m["Source"] for m in mounts if not m["Source"].startswith(own)]
        binds = sorted(s for s in others if s.startswith(str(tmp_path)) or s == "/")
        assert binds == [str(work)], mounts  # that directory only: not its parent, not the root
        assert _changed(sentinels) == []
        assert minicluster("down", name, "--backend", "podman").returncode == 0
        assert _changed(sentinels) == [] and (work / "report.json").is_file()
        assert not (state / name).exists()  # no local-backend layout made for a podman lead (issue 41, item 11)

        campaign["iterations"] = 400  # long enough to cancel mid-run
        (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(spec))
        argv = [MINICLUSTER, "up", str(tmp_path / "campaign.yaml"), "--backend", "podman"]
        running = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        try:

            def a_member_runs() -> bool:
                now = state_file.load_state(name) or {}
                return any(m["state"] == "running" for e in now.get("ensembles", []) for m in e["members"])

            wait_until("a member of the campaign runs", a_member_runs, timeout=300, interval=1.0)
            cancel = minicluster("campaign", "cancel", name)
            assert cancel.returncode == 0, cancel.stdout + cancel.stderr
            output, _ = running.communicate(timeout=300)
        finally:
            if running.poll() is None:
                running.kill()
        assert f"deleted MiniCluster {name}" in output, output[-3000:]
        assert _changed(sentinels) == [] and _changed(theirs) == []
    finally:
        minicluster("down", name, "--backend", "podman")
    assert leftovers(name) == []
