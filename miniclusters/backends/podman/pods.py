"""From what `minicluster render` emits to what `podman kube play` runs: one Pod per Job index. Pure functions.

The rendered objects stay the one template: each pod is the Indexed Job's pod template with what the Job
controller and the kubelet would add (hostname `<name>-<i>`, `JOB_COMPLETION_INDEX`, the completion-index
label), what the headless Service's DNS would answer (podman's CNI network here has no DNS plugin, so every
registered host's name goes into each pod's /etc/hosts through `hostAliases`, at the address the pod is given
with `--ip`), minus the fields podman does not know (subdomain, affinity, resizePolicy) or reads otherwise
(ports: it would publish them on this machine).
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from miniclusters.backends.podman.bundle_mount import NO_VOLUMES, BundleVolumes, mount_bundle
from miniclusters.backends.podman.host_files import mount_host_files, volume_files
from miniclusters.kube_shapes import (
    ConfigMap,
    HostAlias,
    Job,
    Pod,
    PodSpec,
    RenderedObject,
    Secret,
    Service,
)
from miniclusters.render import RenderedObjects
from miniclusters.render.layout import INDEX_LABEL, NAME_LABEL
from miniclusters.render.shared_cores import shared_cores_environment

FIRST_HOST_OFFSET = 2
"""Pod i gets the network's address `first + FIRST_HOST_OFFSET + i` (`.1` is the bridge's gateway)."""
CLUSTER_LABEL = "miniclusters.dev/backend"


@dataclass(frozen=True)
class Rendered:
    """The objects `render_minicluster` returned, by kind."""

    secret: Secret
    config_map: ConfigMap
    service: Service
    """The headless Service (the REST one is reached through the lead's address instead)."""
    job: Job

    @classmethod
    def from_rendered(cls, objects: RenderedObjects) -> Rendered:
        return cls(objects.secret, objects.config_map, objects.headless_service, objects.job)

    @classmethod
    def from_objects(cls, objects: Sequence[RenderedObject]) -> Rendered:
        """From the list form (render_minicluster), by kind; ValueError when one is missing."""
        by_kind: dict[str, RenderedObject] = {}
        for obj in objects:
            if obj["kind"] == "Service" and obj["spec"].get("clusterIP") != "None":
                continue  # the REST Service: reached through the lead's address instead
            by_kind.setdefault(obj["kind"], obj)
        missing = [k for k in ("Secret", "ConfigMap", "Service", "Job") if k not in by_kind]
        if missing:
            raise ValueError(f"rendered objects lack {', '.join(missing)}")
        return cls(
            cast(Secret, by_kind["Secret"]),
            cast(ConfigMap, by_kind["ConfigMap"]),
            cast(Service, by_kind["Service"]),
            cast(Job, by_kind["Job"]),
        )

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.job["metadata"].get("namespace", "default"))


def network_name(cluster: str) -> str:
    return f"minicluster-{cluster}"


def pod_name(cluster: str, index: int) -> str:
    return f"{cluster}-{index}"


def container_name(cluster: str, index: int, container: str) -> str:
    """How `podman kube play` names a pod's container: `<pod>-<container>`."""
    return f"{pod_name(cluster, index)}-{container}"


def pod_address(subnet: str, index: int) -> str:
    """The fixed address of pod `index` on the cluster's network (`--ip`), so /etc/hosts can name it in advance."""
    network = ipaddress.ip_network(subnet)
    if FIRST_HOST_OFFSET + index >= network.num_addresses - 1:
        raise ValueError(f"subnet {subnet} has no address for pod index {index}")
    return str(network.network_address + FIRST_HOST_OFFSET + index)


def host_names(rendered: Rendered, index: int, cluster_domain: str = "cluster.local") -> list[str]:
    """The names the headless Service's DNS gives pod `index`: short, `<pod>.<svc>`, the FQDN."""
    host = pod_name(rendered.name, index)
    service = rendered.service["metadata"]["name"]
    return [host, f"{host}.{service}", f"{host}.{service}.{rendered.namespace}.svc.{cluster_domain}"]


def host_aliases(rendered: Rendered, subnet: str, max_size: int) -> list[HostAlias]:
    """/etc/hosts lines for every registered host (up to maxSize): pods added by a scale-up are already named."""
    return [{"ip": pod_address(subnet, i), "hostnames": host_names(rendered, i)} for i in range(max_size)]


def owned_name(cluster: str, index: int, name: str) -> str:
    """A volume, Secret or ConfigMap name made private to pod `index`: podman 4.3 turns an emptyDir into a
    *named* volume (`mc-run` would be one directory shared by every pod on the machine) and a ConfigMap or
    Secret volume into a volume named after the object, rewritten by every `kube play` that carries it."""
    return f"{pod_name(cluster, index)}-{name}"


def _private_volumes(spec: PodSpec, cluster: str, index: int) -> None:
    """Rename the pod's emptyDir, ConfigMap and Secret volumes to pod-private names (and their mounts)."""
    renamed: dict[str, str] = {}
    for volume in spec.get("volumes", []):
        if "emptyDir" in volume:
            renamed[volume["name"]] = owned_name(cluster, index, volume["name"])
            volume["name"] = renamed[volume["name"]]
        elif "configMap" in volume:
            volume["configMap"]["name"] = owned_name(cluster, index, volume["configMap"]["name"])
        elif "secret" in volume:
            # podman 4.3 writes a Secret volume's files still base64-encoded: a named volume of the pod's own
            # holding them decoded is mounted instead (the backend gives host directories: host_files.py).
            claim = owned_name(cluster, index, volume["secret"]["secretName"])
            del volume["secret"]
            volume["persistentVolumeClaim"] = {"claimName": claim, "readOnly": True}
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        for mount in container.get("volumeMounts", []):
            mount["name"] = renamed.get(mount["name"], mount["name"])


def _renamed(obj: ConfigMap, cluster: str, index: int) -> ConfigMap:
    out = copy.deepcopy(obj)
    out["metadata"] = {**out["metadata"], "name": owned_name(cluster, index, out["metadata"]["name"])}
    return out


def owned_volumes(rendered: Rendered, index: int) -> list[str]:
    """The podman volumes pod `index` owns, for `down` to remove: its emptyDirs, its Secret and ConfigMap."""
    cluster = rendered.name
    spec = rendered.job["spec"]["template"]["spec"]
    volumes = [owned_name(cluster, index, v["name"]) for v in spec.get("volumes", []) if "emptyDir" in v]
    secret = owned_name(cluster, index, rendered.secret["metadata"]["name"])
    config = owned_name(cluster, index, rendered.config_map["metadata"]["name"])
    return [*volumes, secret, config]


def orphan_volumes(cluster: str, volumes: Iterable[str], others: Iterable[str]) -> list[str]:
    """The volumes named as `cluster`'s pods own them (``CLUSTER-INDEX-...``) when its record is lost: podman
    labels the emptyDirs we create, not the ConfigMap volumes `kube play` makes. A volume that another known
    cluster's name explains better (``hello-1`` owns ``hello-1-0-x``, not ``hello``) is left alone."""
    mine = re.compile(rf"^{re.escape(cluster)}-\d+-.")
    longer = [o for o in others if o != cluster and o.startswith(f"{cluster}-")]
    return [v for v in volumes if mine.match(v) and not any(v.startswith(f"{o}-") for o in longer)]


def pod_for_index(
    rendered: Rendered,
    index: int,
    subnet: str,
    max_size: int,
    bundle: BundleVolumes = NO_VOLUMES,
    files: str | None = None,
) -> Pod:
    """The Pod the Indexed Job controller would create for `index`, as podman kube play accepts it; with the
    broker bundle mounted from `bundle`'s volume instead of copied by the init container where one is prepared,
    and the ConfigMap and Secret volumes bind-mounted from the host directory `files` when given (host_files.py)."""
    template = copy.deepcopy(rendered.job["spec"]["template"])
    spec = template["spec"]
    spec.pop("subdomain", None)  # fields podman does not know
    spec.pop("affinity", None)
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        container.pop("resizePolicy", None)
        # podman 4.3 publishes a containerPort on this machine as if it were a hostPort, so the second pod with
        # the REST port failed to start ("address already in use"); Kubernetes publishes none, and every pod's
        # address on the cluster's network is reachable from here (rest_endpoint).
        container.pop("ports", None)
    for container in [*spec.get("initContainers", []), *spec["containers"]]:  # as the Job controller does
        env = [e for e in container.get("env", []) if e.get("name") != "JOB_COMPLETION_INDEX"]
        container["env"] = [{"name": "JOB_COMPLETION_INDEX", "value": str(index)}, *env]
        named = {str(e.get("name")): str(e.get("value", "")) for e in env}  # podman's pods share this machine's cores
        added = shared_cores_environment(named.get("MINICLUSTER_FLAVOUR", ""), named)
        container["env"] += [{"name": k, "value": v} for k, v in added.items()]
    mount_bundle(spec, index, bundle)
    if files is not None:
        mount_host_files(spec, files, set(volume_files(spec, rendered.config_map, rendered.secret)))
    _private_volumes(spec, rendered.name, index)
    spec["hostname"] = pod_name(rendered.name, index)
    spec["hostAliases"] = host_aliases(rendered, subnet, max_size)
    labels = dict(template.get("metadata", {}).get("labels", {}))
    labels.update({INDEX_LABEL: str(index), CLUSTER_LABEL: "podman", "job-name": rendered.name})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(rendered.name, index), "labels": labels},
        "spec": spec,
    }


def play_documents(
    rendered: Rendered,
    index: int,
    subnet: str,
    max_size: int,
    bundle: BundleVolumes = NO_VOLUMES,
    files: str | None = None,
) -> list[ConfigMap | Pod]:
    """What one `podman kube play` of pod `index` reads: the ConfigMap it mounts, then the Pod; the Pod alone when
    its ConfigMap and Secret are host directories (`files`, as the backend plays them)."""
    pod = pod_for_index(rendered, index, subnet, max_size, bundle, files)
    return [pod] if files is not None else [_renamed(rendered.config_map, rendered.name, index), pod]


def cpu_request(rendered: Rendered, container: str) -> str | None:
    """The CPU request of the pod template's `container` (the kubelet turns it into cpu.shares)."""
    for spec in rendered.job["spec"]["template"]["spec"]["containers"]:
        if spec["name"] == container:
            cpu = spec.get("resources", {}).get("requests", {}).get("cpu")
            return str(cpu) if cpu is not None else None
    return None


def registered_hosts(rendered: Rendered) -> int:
    """Hosts the broker config lists (MINICLUSTER_MAX_SIZE in the pod template): the ceiling of any scale."""
    for container in rendered.job["spec"]["template"]["spec"]["containers"]:
        for env in container.get("env", []):
            if env.get("name") == "MINICLUSTER_MAX_SIZE":
                return int(env["value"])
    return int(rendered.job["spec"]["parallelism"])


def cluster_of(labels: Mapping[str, str]) -> tuple[str, int] | None:
    """(cluster, index) of a podman pod we created, from its labels; None for anyone else's pod."""
    if labels.get(CLUSTER_LABEL) != "podman" or NAME_LABEL not in labels or INDEX_LABEL not in labels:
        return None
    return labels[NAME_LABEL], int(labels[INDEX_LABEL])
