"""What a podman cluster was created from, kept on disk beside the local backend's clusters.

podman holds the pods, their containers, volumes and network; this file holds what podman cannot: the spec
(its size is the one writer's record of the wanted size), the image registry/tag and the CURVE keypair, so a
scale-up renders pods that join the same instance. One JSON file per cluster, replaced atomically.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from common import atomic
from miniclusters.api.spec import MiniCluster
from miniclusters.workdirs import state_root

RECORD_FILE = "podman.json"


@dataclass(frozen=True)
class PodmanRecord:
    name: str
    spec: dict[str, Any]  # open: the MiniCluster as JSON (MiniCluster.to_dict), read back by load_minicluster
    """The MiniCluster (to_dict), spec.size kept at the wanted size and maxSize pinned to the registered hosts."""
    registry: str
    tag: str
    certificate: str
    """The zcert text every pod's Secret carries (scale-ups reuse it: a new keypair would lock them out)."""
    network: str
    subnet: str
    cpu: dict[str, int] = field(default_factory=dict)
    """Each pod's CPU request now (millicores by index, as text: JSON keys), after any resize: what a restarted
    container gets back, as the kubelet gives a restarted container its pod's request."""

    def cpu_of(self, index: int) -> int | None:
        return self.cpu.get(str(index))

    @property
    def registered(self) -> int:
        """The hosts the broker config registers (spec.maxSize, pinned when the cluster was created)."""
        return int(self.spec["spec"]["maxSize"])

    def with_size(self, size: int) -> PodmanRecord:
        """This record with spec.size changed (the one writer's record of the wanted size)."""
        return replace(self, spec={**self.spec, "spec": {**self.spec["spec"], "size": size}})


def pinned_spec(mc: MiniCluster, size: int, registered: int) -> dict[str, Any]:  # open: the spec's own JSON
    """The spec as stored: size as wanted, maxSize pinned to the hosts the broker config registers."""
    data = mc.to_dict()
    data["spec"] = {**data["spec"], "size": size, "maxSize": registered}
    return data


class PodmanStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or state_root()) / "podman"

    def path(self, name: str) -> Path:
        return self.root / name / RECORD_FILE

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / RECORD_FILE).is_file())

    def load(self, name: str) -> PodmanRecord:
        return PodmanRecord(**json.loads(self.path(name).read_text()))

    def save(self, record: PodmanRecord) -> None:
        path = self.path(record.name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic.write_text(path, json.dumps(asdict(record), indent=2), mode=0o600)  # holds a private key

    def remove(self, name: str) -> None:
        shutil.rmtree(self.root / name, ignore_errors=True)
        if self.root.is_dir() and not any(self.root.iterdir()):
            self.root.rmdir()
