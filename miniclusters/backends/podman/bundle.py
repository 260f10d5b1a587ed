"""The broker bundle as podman volumes made once per broker image and shared read-only by every pod.

Each pod's init container used to copy the bundle (51 MB, thousands of files) into an emptyDir of its own: a
third container per pod to start on `up`, and on `down` 1-2 s per pod of podman deleting the copy. Here the
image's own installer (`install.sh`, as the init container runs it) fills a named volume once, keyed by the
image's ID (a rebuilt image gets a new volume, and the old one of the same image name is removed when no pod
uses it), and a mark file written after the copy succeeded says the volume is complete. Warm, this costs two
podman commands per `up`, run at once (neither needs the other's answer). Anything failing here falls back to
the init containers with one log line.
"""

from __future__ import annotations

import fcntl
import logging
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypedDict

from miniclusters.backends.base import BackendError
from miniclusters.backends.podman.bundle_mount import INSTALLER, NO_VOLUMES, WITH_EXTRAS, BundleVolumes, variants
from miniclusters.backends.podman.engine import Podman
from miniclusters.kube_shapes import PodContainer
from miniclusters.render.layout import BROKER_INSTALL_DIR

log = logging.getLogger(__name__)

BUNDLE_LABEL = "miniclusters.dev/broker-bundle"
"""On a bundle volume: the ID of the broker image it was filled from."""
IMAGE_LABEL = "miniclusters.dev/broker-image"
"""On a bundle volume: the image's name as the pods named it (a rebuilt image replaces its volumes)."""
READY_MARK = ".miniclusters-bundle-ready"
LOCK_FILE = Path(tempfile.gettempdir()) / "miniclusters-podman-bundle.lock"
FILL_TIMEOUT = 300.0


class ListedVolume(TypedDict, total=False):
    """`podman volume ls --format json`: the fields read here."""

    Name: str
    Mountpoint: str
    Labels: dict[str, str]


def volume_name(image_id: str, extras: bool) -> str:
    return f"miniclusters-broker-{image_id[:12]}{'-extras' if extras else ''}"


def volumes_home(listed: list[ListedVolume], names: set[str]) -> str | None:
    """The directory podman's local driver keeps its volumes in (`<home>/<name>/_data`), as the mountpoint of
    one of the volumes `names` shows it; None when none is listed that way."""
    for volume in listed:
        mountpoint = Path(volume.get("Mountpoint", ""))
        if volume.get("Name") in names and mountpoint.name == "_data" and mountpoint.parent.name == volume["Name"]:
            return str(mountpoint.parent.parent)
    return None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One filler at a time on this machine (two `up`s at once would fill the same volume)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class BundleCache:
    """The bundle volumes of this machine's podman: found ready, or filled once."""

    def __init__(self, podman: Podman, lock_file: Path = LOCK_FILE) -> None:
        self._podman = podman
        self._lock_file = lock_file

    def volumes(self, installer: PodContainer | None, indexes: list[int]) -> BundleVolumes:
        """The volumes the pods of `indexes` mount instead of running `installer`; none (one log line, the init
        containers copy as before) when they could not be made."""
        wanted = variants(installer, indexes)
        if installer is None or not wanted:
            return NO_VOLUMES
        image = installer.get("image", "")
        try:
            return self._ensure(image, wanted)
        except (BackendError, OSError) as exc:
            log.warning("the broker bundle's volume for %s could not be made (%s); pods copy it instead", image, exc)
            return NO_VOLUMES

    def _ensure(self, image: str, wanted: set[bool]) -> BundleVolumes:
        with ThreadPoolExecutor(max_workers=1) as pool:  # the volumes listed while the image is inspected
            listing = pool.submit(self._listed)
            inspected = self._podman.run(["image", "inspect", "--format", "{{.Id}}", image], f"inspecting {image}")
            listed = listing.result()
        image_id = inspected.stdout.strip()
        if not image_id:
            raise BackendError(f"podman gave no ID for image {image}")
        names = {extras: volume_name(image_id, extras) for extras in wanted}
        if not set(names.values()) <= self._ready(image_id, listed):
            with _locked(self._lock_file):
                ready = self._ready(image_id)
                for extras, name in names.items():
                    if name not in ready:
                        self._fill(image, image_id, name, extras)
                self._remove_stale(image, image_id)
            listed = self._listed()
        home = volumes_home(listed, set(names.values()))
        return BundleVolumes(core=names.get(False), extras=names.get(True), home=home)

    def _listed(self) -> list[ListedVolume]:
        listed: list[ListedVolume] = self._podman.json(
            ["volume", "ls", "--filter", f"label={BUNDLE_LABEL}", "--format", "json"], "listing the bundle volumes"
        )
        return listed

    def _ready(self, image_id: str, listed: list[ListedVolume] | None = None) -> set[str]:
        """The bundle volumes of this image whose copy completed (their mark file is there); from `listed` when
        the volumes were just listed."""
        return {
            v["Name"]
            for v in (self._listed() if listed is None else listed)
            if v.get("Labels", {}).get(BUNDLE_LABEL) == image_id and (Path(v["Mountpoint"]) / READY_MARK).is_file()
        }

    def _fill(self, image: str, image_id: str, name: str, extras: bool) -> None:
        """A fresh volume filled by the image's installer, then marked complete (a crash before leaves no mark,
        so the next `up` fills it again)."""
        podman = self._podman
        podman.run(["volume", "rm", "--force", name], f"removing the incomplete volume {name}", check=False)
        labels = ["--label", f"{BUNDLE_LABEL}={image_id}", "--label", f"{IMAGE_LABEL}={image}"]
        podman.run(["volume", "create", *labels, name], f"creating volume {name}")
        option = [WITH_EXTRAS] if extras else []
        install = ["run", "--rm", "--network", "none", "--entrypoint", INSTALLER]
        install += ["--volume", f"{name}:{BROKER_INSTALL_DIR}", image, BROKER_INSTALL_DIR, *option]
        podman.run(install, f"copying the broker bundle of {image} into volume {name}", timeout=FILL_TIMEOUT)
        mountpoint = podman.run(["volume", "inspect", "--format", "{{.Mountpoint}}", name], f"inspecting {name}")
        (Path(mountpoint.stdout.strip()) / READY_MARK).write_text(f"{image_id}\n")
        log.info("filled volume %s with the broker bundle of %s", name, image)

    def _remove_stale(self, image: str, image_id: str) -> None:
        """The volumes of an older build of the same image name; one still mounted by a pod stays (unforced)."""
        for volume in self._listed():
            labels = volume.get("Labels", {})
            if labels.get(IMAGE_LABEL) == image and labels.get(BUNDLE_LABEL) != image_id:
                self._podman.run(["volume", "rm", volume["Name"]], "removing a stale bundle volume", check=False)
