"""One MiniCluster per check of rules.py (api/crd_coverage.py), each breaking that check alone: the CRD must refuse
the ones it carries exactly as `minicluster validate` does, and accept the others. Run against cel-python
(tests/api/test_crd_coverage.py), the fake API server and the real one (tests/kubernetes/test_kube_crd_cases.py).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from miniclusters.api import load_minicluster
from miniclusters.api.errors import SpecError
from miniclusters.api.spec import OUR_API_VERSION
from miniclusters.kube_shapes import KubeObject, ObjectMeta

IMAGE = "ghcr.io/miniclusters/openmpi-openfoam:0.1.0"
SIDECAR = {"image": IMAGE, "name": "sidecar"}


@dataclass(frozen=True)
class Case:
    check: str
    """`function:check` of crd_coverage.CHECKS."""
    spec: dict[str, Any]  # open: a MiniCluster's spec as a user writes it, broken on purpose
    name: str = "case"

    def manifest(self, namespace: str = "default") -> KubeObject:
        spec = copy.deepcopy(self.spec)
        spec.setdefault("containers", [{"image": IMAGE}])
        meta: ObjectMeta = {"name": self.name, "namespace": namespace}
        return {"apiVersion": OUR_API_VERSION, "kind": "MiniCluster", "metadata": meta, "spec": spec}


def _vol(**volume: Any) -> dict[str, Any]:  # open: MiniCluster manifests as a user writes them
    return {"containers": [{"image": IMAGE, "volumes": {"data": volume}}]}


MUX = {"enabled": True, "command": "./sim", "max": 2}
CAMPAIGN = {"ensembles": [{"name": "aoa", "parameter": "angleOfAttack", "values": [0.0, 4.0]}]}


def _campaign(**fields: Any) -> dict[str, Any]:  # open: MiniCluster manifests as a user writes them
    return {"interactive": True, "campaign": {**CAMPAIGN, **fields}}


def _ensemble(**fields: Any) -> dict[str, Any]:  # open: MiniCluster manifests as a user writes them
    return _campaign(ensembles=[{"name": "aoa", "parameter": "angleOfAttack", "values": [0.0], **fields}])


CASES: tuple[Case, ...] = (
    Case("_names:metadata.name", {}, name="big.name"),
    Case("_names:metadata.name", {}, name="n" * 64),
    Case("_names:hostnames", {"maxSize": 10}, name="n" * 62),
    Case("_names:headlessName", {"network": {"headlessName": "Flux_Service"}}),
    Case("_sizes:minSize>maxSize", {"size": 2, "maxSize": 2, "minSize": 3}),
    Case("_sizes:minSize>size", {"size": 2, "maxSize": 4, "minSize": 3}),
    Case("_sizes:maxSize<size", {"size": 3, "maxSize": 2}),
    Case("_sizes:autoscale", {"size": 2, "maxSize": 2, "minSize": 2, "autoscale": {"enabled": True}}),
    Case("_containers:runFlux", {"containers": [{"image": IMAGE, "name": "a"}, SIDECAR]}),
    Case("_containers:runFlux", {"containers": [{"image": IMAGE, "runFlux": True}, {**SIDECAR, "runFlux": True}]}),
    Case("_containers:duplicate name", {"containers": [{"image": IMAGE, "name": "sidecar"}], "services": [SIDECAR]}),
    Case("_container:service name", {"services": [{"image": IMAGE}]}),
    Case("_container:container name", {"containers": [{"image": IMAGE, "runFlux": True}, {"image": IMAGE}]}),
    Case("_container:name label", {"containers": [{"image": IMAGE, "name": "Main"}]}),
    Case("_container:reserved name", {"containers": [{"image": IMAGE, "name": "flux-view"}]}),
    Case("_container:launcher and batch", {"containers": [{"image": IMAGE, "launcher": True, "batch": True}]}),
    Case("_container:blank command", {"containers": [{"image": IMAGE, "command": " \t "}]}),
    Case("_container:script and command",
         {"containers": [{"image": IMAGE, "command": "hostname", "commands": {"script": "echo hi"}}]}),
    Case("_container:service commands", {"services": [{**SIDECAR, "commands": {"brokerPre": "echo"}}]}),
    Case("_container:environment name", {"containers": [{"image": IMAGE, "environment": {"1BAD": "x"}}]}),
    Case("_container_volumes:volume name label",
         {"containers": [{"image": IMAGE, "volumes": {"Data": {"emptyDir": True}}}]}),
    Case("_container_volumes:reserved volume name",
         {"containers": [{"image": IMAGE, "volumes": {"mc-run": {"emptyDir": True}}}]}),
    Case("_container_volumes:claimName path", _vol(claimName="scratch")),
    Case("_container_volumes:hostPath path", _vol(hostPath="/srv/data")),
    Case("_container_volumes:volume path", _vol(emptyDir=True, path="data")),
    Case("_container_volumes:emptyDirSizeLimit", _vol(emptyDir=True, path="/data", emptyDirSizeLimit="lots")),
    Case("_container_volumes:emptyDirSizeLimit", _vol(emptyDir=True, path="/data", emptyDirSizeLimit="-1Gi")),
    Case("_resources:request above limit",
         {"containers": [{"image": IMAGE, "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}),
    Case("_volumes_agree:same volume", {"containers": [
        {"image": IMAGE, "runFlux": True, "volumes": {"data": {"hostPath": "/a", "path": "/d"}}},
        {**SIDECAR, "volumes": {"data": {"hostPath": "/b", "path": "/d"}}}]}),
    Case("_flux:connectTimeout", {"flux": {"connectTimeout": "5 sec"}}),
    Case("_flux:topology", {"flux": {"topology": "kary:0"}}),
    Case("_flux:curveCert", {"flux": {"curveCert": "not a certificate"}}),
    Case("_flux:brokerConfig", {"flux": {"brokerConfig": "[broker"}}),
    Case("_flux:queuePolicy", {"flux": {"scheduler": {"queuePolicy": "hybrid"}}}),
    Case("_labels:label", {"pod": {"labels": {"app": "-bad-"}}}),
    Case("_labels:annotation", {"pod": {"annotations": {"-bad/x": "v"}}}),
    Case("_labels:toleration value", {"pod": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}}),
    Case("_restful:secretName", {"restful": {"secretName": "Token"}}),
    Case("_restful:port", {"restful": {"enabled": True, "port": 8050}}),
    Case("_profiling:boundary", {"profiling": {"boundary": "MPI_barrier"}}),
    Case("_profiling:directory", {"profiling": {"directory": "traces"}}),
    Case("_multiplexing:command", {"interactive": True, "multiplexing": {**MUX, "command": "  "}}),
    Case("_multiplexing:boundary", {"multiplexing": {"boundary": "Allreduce"}}),
    Case("_multiplexing:workdir", {"interactive": True, "multiplexing": {**MUX, "workdir": "/usr/local/sims"}}),
    Case("_multiplexing:total", {"multiplexing": {"max": 3, "total": 2}}),
    Case("_multiplexing:profileTogether", {"multiplexing": {"max": 2, "profileTogether": 3}}),
    Case("_multiplexing:not interactive",
         {"multiplexing": MUX, "containers": [{"image": IMAGE, "command": "hostname"}]}),
    Case("_multiplexing_ranks:ranks",
         {"size": 2, "tasks": 4, "interactive": True, "multiplexing": {**MUX, "ranks": 1}}),
    Case("_multiplexing_ranks:ranks", {"size": 3, "tasks": 2, "interactive": True, "multiplexing": MUX}),
    Case("_campaign:ensemble name label", _ensemble(name="AoA")),
    Case("_campaign:ensemble base", _ensemble(name="base")),
    Case("_campaign:ensemble unique", _campaign(ensembles=[CAMPAIGN["ensembles"][0]] * 2)),
    Case("_campaign:nodes>maxSize", _ensemble(nodes=2)),
    Case("_campaign:nodes>ranks", {**_ensemble(nodes=3), "size": 3}),
    Case("_campaign:values repeat", _ensemble(values=[2.0, 2.0])),
    Case("_campaign:value range", _ensemble(values=[45.0])),
    Case("_campaign_settings:weights count", _campaign(weights=[1.0, 2.0, 3.0])),
    Case("_campaign_settings:weights concentric", _campaign(weights=[1.0, 2.0], decomposition="simple")),
    Case("_campaign_settings:weights positive", _campaign(weights=[1.0, 0.0])),
    Case("_campaign_settings:workdir", _campaign(workdir="relative/cases")),
    Case("_campaign_settings:multiplexing command", {**_campaign(), "multiplexing": {"command": "./sim"}}),
    Case("_campaign_settings:containers command",
         {**_campaign(), "containers": [{"image": IMAGE, "command": "hostname"}]}),
    Case("_malleable:runtime range", {"interactive": True, "malleable": {"runtimeMin": 60.0, "runtimeMax": 30.0,
                                                                        "medianRuntime": 45.0}}),
    Case("_malleable:median runtime", {"interactive": True, "malleable": {"medianRuntime": 300.0}}),
    Case("_malleable:workdir", {"interactive": True, "malleable": {"workdir": "/etc/malleable"}}),
    Case("_malleable:alone", {"interactive": True, "malleable": {}, "multiplexing": MUX}),
    Case("_malleable:containers command", {"malleable": {}, "containers": [{"image": IMAGE, "command": "true"}]}),
    Case("_placement:policy with scaling", {"placement": {"policy": "scale"}, "size": 2, "maxSize": 4}),
    Case("_placement:policy with multiplexing",
         {"placement": {"policy": "scale"}, "interactive": True, "multiplexing": MUX}),
    Case("_placement:groups with policy", {"placement": {"policy": "scale", "groups": 1}}),
    Case("_placement:groups above size", {"placement": {"groups": 2}}),
    Case("_placement:exclusive with multiplexing", {"placement": {"cpus": "exclusive"}, "interactive": True,
         "multiplexing": MUX, "containers": [{"image": IMAGE, "resources": {"requests": {"memory": "1Gi"}}}]}),
    Case("_granularity:tasks below size", {"placement": {"policy": "granularity"}, "size": 2, "tasks": 1}),
    Case("_exclusive_resources:memory request", {"placement": {"cpus": "exclusive"}}),
    Case("_exclusive_resources:limit equal request", {"placement": {"cpus": "exclusive"}, "containers": [
        {"image": IMAGE, "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "2Gi"}}}]}),
    Case("_exclusive_resources:cpu request", {"placement": {"cpus": "exclusive"}, "services": [
        {**SIDECAR, "resources": {"requests": {"memory": "1Gi"}}}],
         "containers": [{"image": IMAGE, "resources": {"requests": {"memory": "1Gi"}}}]}),
    Case("_exclusive_resources:whole cores", {"placement": {"cpus": "exclusive"}, "containers": [
        {"image": IMAGE, "resources": {"requests": {"memory": "1Gi", "cpu": "500m"}}}]}),
    Case("_archive:absolute", {"archive": {"path": "state/archive.db"}}),
    Case("_archive:comma", {"archive": {"path": "/state/a,b.db"}}),
    Case("_archive:claimName path", {"archive": {"claimName": "archive"}}),
    Case("_archive:directory", {"archive": {"claimName": "archive", "path": "/archive.db"}}),
    Case("_archive:claimName label", {"archive": {"claimName": "Archive", "path": "/state/archive.db"}}),
    Case("bursting_problems:hostlist and clusters",
         {"flux": {"bursting": {"hostlist": "x-[0-3]", "clusters": [{"name": "burst", "size": 2}]}}}),
    Case("bursting_problems:plugins without pods",
         {"flux": {"bursting": {"hostlist": "x-[0-3]", "plugins": [{"name": "local"}]}}}),
    Case("_clusters:name label", {"flux": {"bursting": {"clusters": [{"name": "Burst", "size": 2}]}}}),
    Case("_clusters:hostname length", {"flux": {"bursting": {"clusters": [{"name": "b" * 62, "size": 20}]}}}),
    Case("_clusters:hosts taken", {"flux": {"bursting": {"clusters": [{"name": "case", "size": 2}]}}}),
    Case("_legacy_plugin_name:plugin as cluster", {"flux": {"bursting": {"clusters": [{"name": "local"}]}}}),
    Case("_plugins:flavour", {"flux": {"flavour": "flux", "bursting": {"plugins": [{"name": "local"}]}}}),
    Case("_plugins:installed", {"flux": {"bursting": {"plugins": [{"name": "no-such-plugin"}]}}}),
)  # fmt: skip


def python_problems(manifest: KubeObject) -> list[tuple[str, str]]:
    """What `minicluster validate` says: (field path, message) of each problem, sorted."""
    try:
        load_minicluster(copy.deepcopy(manifest))
    except SpecError as exc:
        return sorted({(p.path, p.message) for p in exc.problems})
    return []


_MAP_KEY = re.compile(r"\[([^\]0-9][^\]]*)\]")


def server_problems(message: str | None) -> list[tuple[str, str]]:
    """(field path, message) of each problem in an API server's 422 text (None: accepted), map keys written as
    `validate` writes them (`volumes[data]` → `volumes.data`), sorted."""
    if message is None:
        return []
    listed = message.split(" is invalid: ", 1)[1]
    if listed.startswith("[") and listed.endswith("]"):
        listed = listed[1:-1]
    parts = re.split(r", (?=(?:metadata|spec)[.\[][^:]*: )", listed)
    found = set()
    for part in parts:
        path, _, rest = part.partition(": ")
        found.add((_MAP_KEY.sub(r".\1", path), rest.removeprefix("Invalid value: ")))
    return sorted(found)
