"""Which pre-filled broker volume a podman pod mounts instead of running the init container that copies the
broker bundle into it. Pure functions over the rendered pod template.

The rendered Job keeps its init container (`install.sh /mnt/miniclusters [--with-extras | --with-extras-on-lead]`,
the portable path on Kubernetes); on podman the same bundle is copied once per broker image into a named volume
(bundle.py) that every pod mounts read-only where the init container's emptyDir was: no third container per pod
to start, and nothing to delete per pod on `down` (the copy's thousands of files took 1-2 s per pod to remove).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from miniclusters.kube_shapes import PodContainer, PodSpec

INSTALLER = "/opt/miniclusters/install.sh"
"""The broker image's installer: the command of the built-in flavour's init container (render/job.py)."""
WITH_EXTRAS = "--with-extras"
EXTRAS_ON_LEAD = "--with-extras-on-lead"


@dataclass(frozen=True)
class BundleVolumes:
    """The named volumes holding the broker bundle: the core, and the core with its extras (None: not prepared,
    so pods wanting that variant copy it with their init container as before)."""

    core: str | None = None
    extras: str | None = None
    home: str | None = None
    """Where podman keeps its volumes (`<home>/<name>/_data`), as the bundle volume's mountpoint shows it: where
    a pod's own volumes will be too (None: not known)."""

    def for_extras(self, extras: bool) -> str | None:
        return self.extras if extras else self.core


NO_VOLUMES = BundleVolumes()


def broker_installer(spec: PodSpec) -> PodContainer | None:
    """The init container that copies the broker bundle into the pod (the built-in flavour's), if there is one."""
    return next((c for c in spec.get("initContainers", []) if c.get("command", [""])[:1] == [INSTALLER]), None)


def wants_extras(installer: PodContainer, index: int) -> bool:
    """Whether pod `index` gets the bundle's extras, as install.sh decides it from its option (the lead alone
    with --with-extras-on-lead: JOB_COMPLETION_INDEX 0)."""
    option = installer.get("command", [])[2:3]
    return option == [WITH_EXTRAS] or (option == [EXTRAS_ON_LEAD] and index == 0)


def variants(installer: PodContainer | None, indexes: Iterable[int]) -> set[bool]:
    """The bundle variants (extras or not) the pods of `indexes` need; none without an installer."""
    return set() if installer is None else {wants_extras(installer, i) for i in indexes}


def mount_bundle(spec: PodSpec, index: int, volumes: BundleVolumes) -> None:
    """In place: drop the installer init container and mount its volume from the pre-filled bundle volume,
    read-only, where the template's emptyDir was; unchanged when that variant's volume is not prepared."""
    installer = broker_installer(spec)
    if installer is None:
        return
    claim = volumes.for_extras(wants_extras(installer, index))
    if claim is None:
        return
    filled = {m["name"] for m in installer.get("volumeMounts", [])}
    spec["initContainers"] = [c for c in spec.get("initContainers", []) if c is not installer]
    if not spec["initContainers"]:
        del spec["initContainers"]
    for volume in spec.get("volumes", []):
        if volume["name"] in filled and "emptyDir" in volume:
            del volume["emptyDir"]
            volume["persistentVolumeClaim"] = {"claimName": claim, "readOnly": True}
