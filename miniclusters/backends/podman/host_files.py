"""The files a pod's ConfigMap and Secret volumes show, as one host directory per volume that every pod of the
cluster bind-mounts read-only. Pure functions over the rendered objects.

podman 4.3's `kube play` makes a ConfigMap volume a named volume per pod (and writes a Secret's data still
base64-encoded), so each pod cost a volume created on `up` and removed on `down`, plus one more filled by hand
for the Secret: 4 podman commands per 4-pod `up` and a `volume rm` on `down`. Host directories under the
cluster's record (mode 0700, root's) cost none and go with the record on `down`. A ConfigMap or Secret changed by
a scale-up shows in every pod at once, as a kubelet refreshes a ConfigMap volume.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from miniclusters.kube_shapes import ConfigMap, KeyToPath, PodSpec, PodVolume, Secret

CONFIG_MAP_MODE = 0o644
"""A ConfigMap volume's file mode when its items name none (the Kubernetes default)."""
SECRET_MODE = 0o644


def _projected(data: Mapping[str, bytes], items: list[KeyToPath] | None, mode: int) -> dict[str, tuple[bytes, int]]:
    """{path: (bytes, mode)} as a volume shows `data`: every key, or the items' keys at their paths and modes."""
    if items is None:
        return {key: (value, mode) for key, value in data.items()}
    return {item["path"]: (data[item["key"]], int(item.get("mode", mode))) for item in items}


def volume_files(spec: PodSpec, config_map: ConfigMap, secret: Secret) -> dict[str, dict[str, tuple[bytes, int]]]:
    """{volume name: {path: (bytes, mode)}} for the pod template's ConfigMap and Secret volumes that name the
    rendered ConfigMap and Secret (others are left to `kube play`)."""
    out: dict[str, dict[str, tuple[bytes, int]]] = {}
    secret_data = {key: base64.b64decode(value) for key, value in secret.get("data", {}).items()}
    for volume in spec.get("volumes", []):
        if "configMap" in volume and volume["configMap"].get("name") == config_map["metadata"]["name"]:
            config_data = {key: value.encode() for key, value in config_map.get("data", {}).items()}
            out[volume["name"]] = _projected(config_data, volume["configMap"].get("items"), CONFIG_MAP_MODE)
        elif "secret" in volume and volume["secret"].get("secretName") == secret["metadata"]["name"]:
            source = volume["secret"]
            out[volume["name"]] = _projected(
                secret_data, source.get("items"), int(source.get("defaultMode", SECRET_MODE))
            )
    return out


def mount_host_files(spec: PodSpec, directory: str, names: set[str]) -> None:
    """In place: the volumes `names` (volume_files' keys) become read-only bind mounts of DIRECTORY/<volume>."""
    for index, volume in enumerate(spec.get("volumes", [])):
        if volume["name"] in names:
            host: PodVolume = {"name": volume["name"], "hostPath": {"path": f"{directory}/{volume['name']}"}}
            host["hostPath"]["type"] = "Directory"
            spec["volumes"][index] = host
