"""How a podman `up` asks podman less, without podman: the subnet read from the network's own file, the name's
check beside the network's creation (a refused `up` removes only the network it made), one container inspect
after the plays serving both the lead's run directory and the first status; each with its plain path."""

from __future__ import annotations

import json
import subprocess
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
from miniclusters.backends.podman.pods import CLUSTER_LABEL
from miniclusters.backends.reporting import Polling
from miniclusters.render.layout import INDEX_LABEL, NAME_LABEL

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


class _Listing:
    """podman listing the pods of the clusters `names`."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.calls = 0

    def json(self, argv: list[str], doing: str) -> Any:
        assert argv[:2] == ["pod", "ps"], argv
        self.calls += 1
        return [{"Labels": {NAME_LABEL: n, INDEX_LABEL: "0", CLUSTER_LABEL: "podman"}} for n in self.names]


class _Podman:
    def __init__(self, names: list[str]) -> None:
        self.podman = _Listing(names)


def _lifecycle(player: _Player, ctx: Any = None, status: Any = None) -> PodmanLifecycle:
    return PodmanLifecycle(cast(PodmanContext, ctx), cast(PodPlayer, player), status)


def test_a_network_just_made_means_the_name_is_free_without_asking_for_pods() -> None:
    ctx = _Podman(["up"])
    assert _lifecycle(_Player(made=True), ctx)._network_unless_taken("up", "minicluster-up") == "10.89.3.0/24"
    assert ctx.podman.calls == 0


def test_a_network_already_there_is_reused_unless_podman_has_pods_of_that_name() -> None:
    player = _Player(made=False)
    assert _lifecycle(player, _Podman(["other"]))._network_unless_taken("up", "minicluster-up") == "10.89.3.0/24"
    with pytest.raises(InvalidRequestError, match="'up' already exists"):
        _lifecycle(player, _Podman(["up"]))._network_unless_taken("up", "minicluster-up")
    assert player.removed == []  # not made here: left as it was


def test_a_taken_name_is_what_a_failed_network_creation_reports() -> None:
    with pytest.raises(InvalidRequestError, match="already exists"):
        _lifecycle(_Player(fail=True), _Podman(["up"]))._network_unless_taken("up", "minicluster-up")
    with pytest.raises(BackendError, match="exited 125"):
        _lifecycle(_Player(fail=True), _Podman([]))._network_unless_taken("up", "minicluster-up")


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
