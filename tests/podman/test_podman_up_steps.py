"""How a podman `up` asks podman less, without podman: the subnet read from the network's own file, the name's
check beside the network's creation (a refused `up` removes only the network it made), one container inspect
after the plays serving both the lead's run directory and the first status; each with its plain path."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import Future
from pathlib import Path
from typing import Any, cast

import pytest

from miniclusters.api import load_minicluster
from miniclusters.backends.base import BackendError, ClusterStatus, CreateOptions, InvalidRequestError
from miniclusters.backends.overlay import Ranks
from miniclusters.backends.podman.bundle import volumes_home
from miniclusters.backends.podman.core import PodmanContext
from miniclusters.backends.podman.engine import Podman
from miniclusters.backends.podman.lifecycle import PodmanLifecycle
from miniclusters.backends.podman.netconf import read_subnet, subnet_in
from miniclusters.backends.podman.observe import PodmanPod, inspect_pods, mount_source
from miniclusters.backends.podman.play import PodPlayer
from miniclusters.backends.reporting import Polling

CNI = {
    "cniVersion": "0.4.0",
    "name": "minicluster-up",
    "plugins": [{"type": "bridge", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.89.7.0/24"}]]}}],
}
NETAVARK = {"name": "minicluster-up", "driver": "bridge", "subnets": [{"subnet": "10.89.8.0/24"}]}


def test_the_subnet_is_read_from_the_network_s_cni_or_netavark_file() -> None:
    assert subnet_in(CNI, "minicluster-up") == "10.89.7.0/24"
    assert subnet_in(NETAVARK, "minicluster-up") == "10.89.8.0/24"
    assert subnet_in(CNI, "minicluster-other") is None  # another network's file says nothing of this one
    assert subnet_in({"name": "minicluster-up", "plugins": [{"type": "bridge"}]}, "minicluster-up") is None


def test_without_a_file_that_names_it_the_subnet_is_not_known(tmp_path: Path) -> None:
    files = [str(tmp_path / "cni" / "{name}.conflist"), str(tmp_path / "netavark" / "{name}.json")]
    assert read_subnet("minicluster-up", files) is None
    (tmp_path / "cni").mkdir()
    (tmp_path / "cni" / "minicluster-up.conflist").write_text("{not json")
    (tmp_path / "netavark").mkdir()
    (tmp_path / "netavark" / "minicluster-up.json").write_text(json.dumps(NETAVARK))
    assert read_subnet("minicluster-up", files) == "10.89.8.0/24"


def test_where_podman_keeps_volumes_is_read_from_a_bundle_volume_s_mountpoint() -> None:
    listed: list[Any] = [
        {"Name": "other", "Mountpoint": "/elsewhere/other/_data"},
        {"Name": "bundle", "Mountpoint": "/var/lib/containers/storage/volumes/bundle/_data"},
    ]
    assert volumes_home(listed, {"bundle"}) == "/var/lib/containers/storage/volumes"
    assert volumes_home([{"Name": "bundle", "Mountpoint": "/plugin/made/it"}], {"bundle"}) is None
    assert volumes_home(listed, {"missing"}) is None


# ------------------------------------------------------------------ one inspect after the plays


class _Inspect:
    """podman answering `container inspect` for the containers it has; anything else is a test failure."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], doing: str, check: bool = True, **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        assert argv[:2] == ["container", "inspect"], argv
        found = [d for d in self.docs if d["Name"] in argv[2:]]
        return subprocess.CompletedProcess(argv, 0 if len(found) == len(argv) - 2 else 125, json.dumps(found), "")


LEAD = {
    "Name": "up-0-up",
    "State": {"Status": "running", "Pid": 10},
    "Mounts": [{"Destination": "/run/flux", "Source": "/vols/up-0-mc-run/_data"}],
}


def test_the_pods_just_played_are_read_with_one_container_inspect_and_show_the_lead_s_run_dir() -> None:
    podman = _Inspect([LEAD, {"Name": "up-1-up", "State": {"Status": "running", "Pid": 11}}])
    pods = inspect_pods(cast(Podman, podman), "up", "up", range(3))
    assert [c[:2] for c in podman.calls] == [["container", "inspect"]]  # no `pod ps`
    assert [(p.index, p.name, p.pid) for p in pods] == [(0, "up-0", 10), (1, "up-1", 11), (2, "up-2", None)]
    assert pods[2].container is None  # not created yet: still initialising
    assert mount_source(pods[0].container, "/run/flux") == "/vols/up-0-mc-run/_data"
    assert mount_source(pods[1].container, "/run/flux") is None


# ------------------------------------------------------------------ the lifecycle's steps, scripted


class _Player:
    def __init__(self, made: bool = True, fail: bool = False) -> None:
        self.made, self.fail = made, fail
        self.removed: list[str] = []
        self.run_dirs: list[str] = []

    def create_network(self, name: str, network: str) -> tuple[str, bool]:
        if self.fail:
            raise BackendError("creating podman network: exited 125")
        return "10.89.3.0/24", self.made

    def remove_network(self, network: str) -> None:
        self.removed.append(network)

    def run_dir(self, name: str, index: int) -> Path:
        self.run_dirs.append(name)
        return Path("/from/volume/inspect/rundir")


def _known(names: list[str]) -> Future[list[str]]:
    future: Future[list[str]] = Future()
    future.set_result(names)
    return future


def _lifecycle(player: _Player, ctx: Any = None, status: Any = None) -> PodmanLifecycle:
    return PodmanLifecycle(cast(PodmanContext, ctx), cast(PodPlayer, player), status)


@pytest.mark.parametrize("made", [True, False])
def test_a_name_podman_already_has_refuses_the_up_and_removes_only_a_network_it_made(made: bool) -> None:
    player = _Player(made=made)
    with pytest.raises(InvalidRequestError, match="'up' already exists"):
        _lifecycle(player)._network_unless_taken("up", "minicluster-up", _known(["up"]))
    assert player.removed == (["minicluster-up"] if made else [])
    assert _lifecycle(player)._network_unless_taken("up", "minicluster-up", _known(["other"])) == "10.89.3.0/24"


def test_a_taken_name_is_what_a_failed_network_creation_reports() -> None:
    with pytest.raises(InvalidRequestError, match="already exists"):
        _lifecycle(_Player(fail=True))._network_unless_taken("up", "minicluster-up", _known(["up"]))
    with pytest.raises(BackendError, match="exited 125"):
        _lifecycle(_Player(fail=True))._network_unless_taken("up", "minicluster-up", _known([]))


class _Ctx:
    polling = Polling(lambda: 0.0, lambda _: None, 1.0)

    def __init__(self, pods: list[PodmanPod]) -> None:
        self.pods = pods

    def started_pods(self, name: str, mc: Any, indexes: Any) -> list[PodmanPod]:
        return self.pods


UP: Ranks = ((0, 1), ())


@pytest.mark.parametrize("home", ["known", "unknown", "missing"])
def test_the_brokers_are_awaited_in_the_lead_s_volume_and_the_inspect_is_the_first_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: str
) -> None:
    """The run directory where podman keeps volumes when that is there; else as the inspect's mounts say."""
    waited: list[Path] = []

    def await_from_host(rundir: Path, size: int, *_: Any) -> Ranks:
        waited.append(rundir)
        return UP

    monkeypatch.setattr("miniclusters.backends.podman.lifecycle.await_from_host", await_from_host)
    if home == "known":
        (tmp_path / "up-0-mc-run" / "_data").mkdir(parents=True)
    pods = [PodmanPod(0, "up-0", "", cast(Any, LEAD)), PodmanPod(1, "up-1", "", None)]
    reads: list[tuple[Ranks | None, list[PodmanPod] | None]] = []

    def status(name: str, ranks: Ranks | None, read: list[PodmanPod] | None) -> ClusterStatus:
        reads.append((ranks, read))
        return ClusterStatus(name, "default", 2, 2, 2, (), ranks_up=UP[0], finished=True, succeeded=True)  # done

    mc = load_minicluster({"metadata": {"name": "up"}, "spec": {"size": 2, "interactive": True, "containers": [{}]}})
    player = _Player()
    lifecycle = _lifecycle(player, _Ctx(pods), status)
    lifecycle._started(mc, CreateOptions(timeout=60), None if home == "unknown" else str(tmp_path))
    expected = tmp_path / "up-0-mc-run" / "_data" / "rundir" if home == "known" else Path("/vols/up-0-mc-run/_data")
    assert waited == [expected if home == "known" else expected / "rundir"]
    assert reads[0] == (UP, pods)  # the first status: what the lead said, the pods as inspected
    assert player.run_dirs == []  # the lead's volume was never inspected
