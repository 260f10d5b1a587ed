"""Our images, from podman's store into containerd's `k8s.io` namespace: pods start them with IfNotPresent.

No registry serves images to this machine, so the kubelet must find every image already there: the pod sandbox
("pause") and ours. An image is imported again only when podman's copy changed (its id is kept beside the
cluster's state), so a second `up` costs nothing here.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from common import atomic
from miniclusters.errors import MiniclustersError
from miniclusters.localkube.configs import PAUSE_IMAGE
from miniclusters.localkube.layout import Layout


class ImageMissing(MiniclustersError, RuntimeError):
    """An image `up` needs is not in podman's store: `make images` builds it."""


def wanted_images(registry: str, tag: str) -> tuple[str, ...]:
    return (
        PAUSE_IMAGE,
        f"{registry}/miniclusters-broker:{tag}",
        f"{registry}/openmpi-openfoam:{tag}",
        f"{registry}/miniclusters-flux-view:{tag}",
    )


def _podman_id(image: str) -> str | None:
    found = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True, text=True, check=False
    )
    return found.stdout.strip() or None if found.returncode == 0 else None


def _record(layout: Layout) -> Path:
    return layout.containerd_root.parent / "imported-images.json"


def _imported(layout: Layout) -> dict[str, str]:
    try:
        value = json.loads(_record(layout).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _in_containerd(layout: Layout) -> set[str]:
    listed = subprocess.run(
        ["ctr", "--address", str(layout.containerd_socket), "-n", "k8s.io", "images", "ls", "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    return set(listed.stdout.split())


def import_images(layout: Layout, images: tuple[str, ...], say: Callable[[str], None]) -> list[str]:
    """Import each image podman has and containerd lacks (or has an older copy of); returns those imported.
    Raises ImageMissing naming the first image podman does not have."""
    done = _imported(layout)
    present = _in_containerd(layout)
    imported: list[str] = []
    for image in images:
        image_id = _podman_id(image)
        if image_id is None:
            raise ImageMissing(f"image {image} is not in podman's store: run `make images`")
        if done.get(image) == image_id and image in present:
            continue
        say(f"importing {image} into containerd")
        save = subprocess.Popen(
            ["podman", "save", "--format", "docker-archive", image], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        load = subprocess.run(
            ["ctr", "--address", str(layout.containerd_socket), "-n", "k8s.io", "images", "import", "-"],
            stdin=save.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
        assert save.stdout is not None
        save.stdout.close()
        save_error = save.stderr.read().decode(errors="replace") if save.stderr else ""
        if save.wait() != 0 or load.returncode != 0:
            raise ImageMissing(f"importing {image} failed: {save_error.strip()} {load.stderr.strip()}".strip())
        done[image] = image_id
        atomic.write_text(_record(layout), json.dumps(done, indent=2))
        imported.append(image)
    return imported
