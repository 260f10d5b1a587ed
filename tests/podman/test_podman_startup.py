"""What makes a podman `up` and `down` cheap, without podman: the broker bundle mounted from a volume filled once
per image instead of copied by an init container, the ConfigMap and Secret as host directories, removal that
lets conmon's cleanups finish first, and the wait for the brokers through the lead's socket from this machine;
each with its fall back to the plain path."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from miniclusters.api import load_minicluster
from miniclusters.backends.base import BackendError, ClusterStatus, ExecResult
from miniclusters.backends.podman.bundle import BUNDLE_LABEL, IMAGE_LABEL, READY_MARK, BundleCache, volume_name
from miniclusters.backends.podman.bundle_mount import NO_VOLUMES, BundleVolumes, broker_installer, variants
from miniclusters.backends.podman.core import PodmanContext
from miniclusters.backends.podman.engine import Podman, PodmanError
from miniclusters.backends.podman.host_files import volume_files
from miniclusters.backends.podman.lifecycle import PodmanLifecycle
from miniclusters.backends.podman.observe import conmon_processes
from miniclusters.backends.podman.play import CLEANUP_WAIT_S, PodPlayer
from miniclusters.backends.podman.pods import Rendered, play_documents, pod_for_index
from miniclusters.backends.podman.ready_host import await_from_host
from miniclusters.backends.podman.state import PodmanStore
from miniclusters.backends.reporting import Polling
from miniclusters.render import render_objects
from miniclusters.render.layout import BROKER_INSTALL_DIR, VOLUME_BROKER

IMAGE_ID = "0123456789abcdef" * 4


def _rendered(flux: dict[str, Any] | None = None, restful: bool = True) -> Rendered:
    spec: dict[str, Any] = {"size": 2, "maxSize": 4, "containers": [{"image": "app:1"}], "interactive": True}
    if flux:
        spec["flux"] = flux
    if restful:
        spec["restful"] = {"enabled": True}
    return Rendered.from_rendered(render_objects(load_minicluster({"metadata": {"name": "pb"}, "spec": spec})))


def _template(rendered: Rendered) -> Any:
    return rendered.job["spec"]["template"]["spec"]


# ------------------------------------------------------------------ the bundle volume (pure)


def test_a_prepared_bundle_volume_replaces_the_init_container_read_only_lead_with_extras() -> None:
    rendered = _rendered()
    assert variants(broker_installer(_template(rendered)), [0, 1]) == {True, False}  # --with-extras-on-lead
    volumes = BundleVolumes(core="b-core", extras="b-extras")
    for index, claim in ((0, "b-extras"), (1, "b-core")):
        spec = pod_for_index(rendered, index, "10.89.3.0/24", 4, volumes)["spec"]
        assert "initContainers" not in spec
        broker = next(v for v in spec["volumes"] if v["name"] == VOLUME_BROKER)
        assert broker == {"name": VOLUME_BROKER, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
        mounts = spec["containers"][0]["volumeMounts"]
        assert {"name": VOLUME_BROKER, "mountPath": BROKER_INSTALL_DIR, "readOnly": True} in mounts
    assert "initContainers" in _template(rendered)  # the rendered Job (Kubernetes' path) is left as it is


def test_without_its_volume_a_pod_copies_the_bundle_with_its_init_container() -> None:
    rendered = _rendered()
    for volumes in (NO_VOLUMES, BundleVolumes(core="b-core")):  # the lead wants the extras, not prepared
        spec = pod_for_index(rendered, 0, "10.89.3.0/24", 4, volumes)["spec"]
        assert [c["name"] for c in spec["initContainers"]] == ["miniclusters-broker"]
        assert "emptyDir" in next(v for v in spec["volumes"] if v["name"] == f"pb-0-{VOLUME_BROKER}")


def test_the_flux_flavour_keeps_its_view_init_container() -> None:
    rendered = _rendered({"flavour": "flux"})
    assert broker_installer(_template(rendered)) is None
    spec = pod_for_index(rendered, 0, "10.89.3.0/24", 4, BundleVolumes("b-core", "b-extras"))["spec"]
    assert len(spec["initContainers"]) == 1


def test_the_rest_port_is_not_published_so_every_pod_of_a_rest_cluster_starts() -> None:
    """podman would publish a containerPort on this machine: the second pod's REST port was already in use."""
    rendered = _rendered()
    assert any("ports" in c for c in _template(rendered)["containers"])  # rendered for Kubernetes, kept there
    for index in (0, 1):
        assert all("ports" not in c for c in pod_for_index(rendered, index, "10.89.3.0/24", 4)["spec"]["containers"])


# ------------------------------------------------------------------ the ConfigMap and Secret as host files (pure)


def test_config_map_and_secret_volumes_become_host_directories_with_their_modes() -> None:
    rendered = _rendered()
    files = volume_files(_template(rendered), rendered.config_map, rendered.secret)
    assert files["mc-scripts"]["entrypoint.sh"] == (rendered.config_map["data"]["entrypoint.sh"].encode(), 0o755)
    assert files["mc-config"]["broker.toml"][1] == 0o644
    cert, mode = files["mc-curve-cert"]["curve.cert"]
    assert mode == 0o400 and cert.startswith(b"#")  # decoded, not the Secret's base64
    documents = play_documents(rendered, 1, "10.89.3.0/24", 4, NO_VOLUMES, "/state/pb/files")
    assert [d["kind"] for d in documents] == ["Pod"]
    volumes = {v["name"]: v for v in cast(Any, documents[0])["spec"]["volumes"]}
    for name in files:
        assert volumes[name] == {"name": name, "hostPath": {"path": f"/state/pb/files/{name}", "type": "Directory"}}


# ------------------------------------------------------------------ the bundle cache (a scripted podman)


class _Podman:
    """podman answering the bundle cache's commands: the volumes it lists, the mountpoints it gives."""

    def __init__(self, root: Path, listed: list[dict[str, Any]], fail: str = "") -> None:
        self.root, self.listed, self.fail = root, listed, fail
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], doing: str, check: bool = True, **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if self.fail and argv[:2] == self.fail.split():
            raise PodmanError(doing, argv, 125, "Error: no such image")
        out = ""
        if argv[:2] == ["image", "inspect"]:
            out = IMAGE_ID + "\n"
        elif argv[:2] == ["volume", "create"]:
            labels = dict(a.split("=", 1) for a in argv[3:-1:2])
            (self.root / argv[-1]).mkdir()
            self.listed.append({"Name": argv[-1], "Mountpoint": str(self.root / argv[-1]), "Labels": labels})
        elif argv[:2] == ["volume", "inspect"]:
            out = str(self.root / argv[-1]) + "\n"
        return subprocess.CompletedProcess(argv, 0, out, "")

    def json(self, argv: list[str], doing: str) -> Any:
        self.calls.append(list(argv))
        return json.loads(json.dumps(self.listed))


def _cache(podman: _Podman, tmp_path: Path) -> BundleCache:
    return BundleCache(cast(Podman, podman), tmp_path / "lock")


def test_a_warm_bundle_volume_costs_two_podman_commands(tmp_path: Path) -> None:
    core = volume_name(IMAGE_ID, False)
    (tmp_path / core).mkdir()
    (tmp_path / core / READY_MARK).write_text(IMAGE_ID)
    labels = {BUNDLE_LABEL: IMAGE_ID, IMAGE_LABEL: "broker:1"}
    podman = _Podman(tmp_path, [{"Name": core, "Mountpoint": str(tmp_path / core), "Labels": labels}])
    installer = broker_installer(_template(_rendered(restful=False)))
    assert _cache(podman, tmp_path).volumes(installer, [0, 1]) == BundleVolumes(core=core)
    assert sorted(c[:2] for c in podman.calls) == [["image", "inspect"], ["volume", "ls"]]  # at once


def test_a_cold_or_half_filled_volume_is_filled_by_the_image_s_installer_and_old_builds_go(tmp_path: Path) -> None:
    extras = volume_name(IMAGE_ID, True)
    old: dict[str, Any] = {
        "Name": "miniclusters-broker-old",
        "Mountpoint": "/x",
        "Labels": {BUNDLE_LABEL: "old", IMAGE_LABEL: ""},
    }
    half = {"Name": extras, "Mountpoint": "/nowhere", "Labels": {BUNDLE_LABEL: IMAGE_ID}}  # no mark: a crash
    podman = _Podman(tmp_path, [old, half])
    installer = broker_installer(_template(_rendered()))
    assert installer is not None
    old["Labels"][IMAGE_LABEL] = installer["image"]
    volumes = _cache(podman, tmp_path).volumes(installer, [0])
    assert volumes == BundleVolumes(extras=extras)
    run = next(c for c in podman.calls if c[0] == "run")
    assert run[-3:] == [installer["image"], BROKER_INSTALL_DIR, "--with-extras"]
    assert f"{extras}:{BROKER_INSTALL_DIR}" in run
    assert ["volume", "rm", "--force", extras] in podman.calls  # the half-filled one, before it is made again
    assert (tmp_path / extras / READY_MARK).read_text().strip() == IMAGE_ID
    assert ["volume", "rm", "miniclusters-broker-old"] in podman.calls  # unforced: one in use stays


def test_a_bundle_volume_that_cannot_be_made_falls_back_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    installer = broker_installer(_template(_rendered()))
    with caplog.at_level(logging.WARNING):
        for fail in ("image inspect", "run --rm"):
            caplog.clear()
            assert _cache(_Podman(tmp_path, [], fail), tmp_path).volumes(installer, [0, 1]) == NO_VOLUMES
            assert len(caplog.records) == 1 and "pods copy it instead" in caplog.records[0].message
            for child in tmp_path.iterdir():
                if child.is_dir():
                    child.rmdir()


# ------------------------------------------------------------------ down: conmon's cleanups first


def test_conmon_processes_are_counted_from_the_pods_cgroups(tmp_path: Path) -> None:
    procs = tmp_path / "pids" / "libpod_parent" / "p1" / "conmon" / "cgroup.procs"
    procs.parent.mkdir(parents=True)
    procs.write_text("12\n13\n")
    assert conmon_processes(["p1", "p2"], tmp_path) == 2
    procs.write_text("")
    assert conmon_processes(["p1"], tmp_path) == 0


class _Removal:
    """podman for a removal: two pods listed with their IDs; the conmon count drops as the clock runs."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], doing: str, check: bool = True, **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        out = "pb-0 id0\npb-1 id1\n" if argv[:2] == ["pod", "ps"] else ""
        return subprocess.CompletedProcess(argv, 0, out, "")


@pytest.mark.parametrize("cleaned_after", [0.3, None])
def test_pods_are_removed_once_conmon_s_cleanups_are_done_or_waited_for_long_enough(
    monkeypatch: pytest.MonkeyPatch, cleaned_after: float | None
) -> None:
    now = [0.0]
    monkeypatch.setattr(
        "miniclusters.backends.podman.play.conmon_processes",
        lambda ids: 0 if cleaned_after is not None and now[0] >= cleaned_after else len(ids),
    )
    podman = _Removal()

    def sleep(seconds: float) -> None:
        now[0] += seconds

    ctx = PodmanContext(cast(Podman, podman), PodmanStore(), "default", Polling(lambda: now[0], sleep, 1.0))
    PodPlayer(ctx).remove_pods(_rendered(), [0, 1])
    verbs = [c[:2] for c in podman.calls]
    assert verbs[:3] == [["pod", "ps"], ["pod", "kill"], ["pod", "rm"]]
    assert now[0] >= (cleaned_after if cleaned_after is not None else CLEANUP_WAIT_S)
    assert now[0] < (cleaned_after + 0.2 if cleaned_after is not None else CLEANUP_WAIT_S + 0.2)


# ------------------------------------------------------------------ the wait for the brokers from this machine


def test_the_brokers_are_awaited_through_the_lead_s_socket_even_on_a_long_path(tmp_path: Path) -> None:
    """A real 2-broker instance of ours; its rundir reached again through a path too long for a Unix socket."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.parent.mkdir()
    script = (
        "import os, sys, time; from pathlib import Path; "
        "from miniclusters.backends.podman.ready_host import await_from_host; "
        "rundir = Path(os.environ['FLUX_URI'][len('local://'):]).parent; "
        f"deep = Path({str(deep)!r}); deep.symlink_to(rundir); "
        "print(await_from_host(deep, 2, 60, time.monotonic, time.sleep), "
        "await_from_host(deep, 3, 1, time.monotonic, time.sleep))"
    )
    flux = str(Path(sys.executable).with_name("flux"))
    done = subprocess.run(
        [flux, "start", "--test-size=2", sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "((0, 1), ()) None"


def test_a_lead_socket_that_never_appears_is_a_timeout_not_an_error(tmp_path: Path) -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    assert await_from_host(tmp_path, 2, 1.0, lambda: now[0], sleep) is None


def test_a_wait_from_this_machine_that_fails_asks_inside_the_lead_with_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = json.dumps({"ranks": [{"rank": 0, "state": "up"}, {"rank": 1, "state": "up"}]})

    class Ctx:
        polling = Polling(lambda: 0.0, lambda _: None, 1.0)

        def run_in_pod(self, name: str, mc: Any, index: int, argv: list[str], timeout: float) -> ExecResult:
            return ExecResult(0, answer, "")

    class Player:
        def run_dir(self, name: str, index: int) -> Path:
            raise BackendError("no such volume")

    def status(name: str, ranks: Any, pods: Any) -> ClusterStatus:
        raise AssertionError("not read here")

    lifecycle = PodmanLifecycle(cast(PodmanContext, Ctx()), cast(PodPlayer, Player()), status)
    mc = load_minicluster({"metadata": {"name": "pb"}, "spec": {"size": 2, "containers": [{"image": "a"}]}})
    with caplog.at_level(logging.WARNING):
        assert lifecycle._await_brokers(mc, 60) == ((0, 1), ())
    assert len(caplog.records) == 1 and "asking inside the lead instead" in caplog.records[0].message
