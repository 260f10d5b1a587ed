"""Conversion between the Flux Operator's MiniCluster and ours is lossless for every shared field."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel

from miniclusters.api import load_minicluster, load_minicluster_file
from miniclusters.api.conversion import EXTENSIONS_ANNOTATION, from_flux_operator, to_flux_operator, to_ours
from miniclusters.api.spec import MiniClusterSpec

ROOT = Path(__file__).resolve().parents[2]


def _non_default(annotation: Any, name: str) -> Any:
    """A value for a field that differs from its default, so a dropped field would be noticed."""
    origin = get_origin(annotation)
    if origin in (typing.Union, type(int | None)):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
        origin = get_origin(annotation)
    if origin is typing.Literal:
        return get_args(annotation)[-1]
    if origin is list:
        return [_non_default(get_args(annotation)[0], name)]
    if origin is dict:
        return {"k1": _non_default(get_args(annotation)[1], name)}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _every_field(annotation)
    if annotation is bool:
        return True
    if annotation is int:
        return 3
    if annotation is str:
        return f"v-{name}"
    return "250m"  # quantities and other pass-throughs


def _every_field(model: type[BaseModel]) -> dict[str, Any]:
    return {(info.alias or name): _non_default(info.annotation, name) for name, info in model.model_fields.items()}


def _everything_set() -> dict[str, Any]:
    spec = _every_field(MiniClusterSpec)
    # Make the random values satisfy the cross-field rules while keeping every field non-default.
    spec.update({"size": 3, "maxSize": 5, "minSize": 2, "tasks": 6, "deadlineSeconds": 99, "backoffLimit": 7})
    container = spec["containers"][0]
    container.update(
        {"name": "app", "runFlux": True, "launcher": False, "batch": True, "ports": [8080], "imagePullPolicy": "Always"}
    )
    container["commands"]["script"] = ""
    container["volumes"] = {"data": {"path": "/data", "claimName": "pvc", "readOnly": True}}
    container["resources"] = {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}, "claims": [{"name": "gpu"}]}
    container["environment"] = {"A_B": "1"}
    container["secrets"] = {"TOKEN": {"name": "s", "key": "k"}}
    service = dict(container, name="svc", runFlux=False, commands={"servicePre": "echo", "init": "true"})
    spec["services"] = [service]
    spec["network"] = {"headlessName": "svc-net", "disableAffinity": True}
    flux = spec["flux"]
    flux.update({"connectTimeout": "7s", "topology": "kary:3", "logLevel": 7, "curveCert": "", "brokerConfig": ""})
    flux["scheduler"] = {"simple": True, "queuePolicy": "easy"}
    flux["bursting"] = {
        "leadBroker": {"address": "1.2.3.4", "name": "lead", "size": 2, "port": 9000},
        "hostlist": "",
        "clusters": [{"name": "far", "size": 2}],
        "plugins": [{"name": "local", "size": 2}],
    }
    flux["container"]["resources"] = {"requests": {"cpu": "100m"}}
    flux["flavour"] = "builtin"  # burst plugins need the builtin broker's burst service (burst_rules.py)
    spec["pod"].update(
        {
            "labels": {"team": "cfd"},
            "jobLabels": None,
            "annotations": {"note": "x"},
            "nodeAffinity": {"zone": ["a", "b"]},
            "tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
            "resources": {"cpu": "100m"},
            "securityContext": {"runAsUser": 1000},
        }
    )
    del spec["pod"]["jobLabels"]
    spec["jobLabels"] = {"campaign": "naca"}
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    spec["restful"] = {"enabled": True, "port": 5001, "mode": "multi-user", "requireAuth": False, "secretName": "creds"}
    spec["profiling"] = {"enabled": True, "iterations": 50, "directory": "/shared/pmpi", "boundary": "MPI_Allreduce"}
    spec["multiplexing"] = {
        "enabled": True, "command": "proxy_solver 3000 2048 32 1,1,1,20", "max": 3, "total": 5, "ranks": 4,
        "profileIterations": 40, "profileTogether": 2, "fairness": 1.2, "efficiencyThreshold": 0.8, "headroom": 1.5,
        "boundary": "MPI_Allreduce", "workdir": "/shared/mux",
    }  # fmt: skip
    spec["autoscale"] = {
        "enabled": True,
        "idleSeconds": 120,
        "cooldownSeconds": 45,
        "policy": "fcfs",
        "intervalSeconds": 2.5,
    }
    # groups with policy none (a policy would reshape it, and multiplexing is on here, so CPUs stay shared)
    spec["placement"] = {"profile": "network", "policy": "none", "cpus": "shared", "groups": 2}
    spec["archive"] = {"path": "/archive/queue.tar.gz", "claimName": "queue-archive", "unfit": "reject"}
    spec["campaign"] = {
        "case": "naca0012", "iterations": 9, "ranks": 3, "decomposition": "concentric", "weights": [1, 2, 4],
        "profileIterations": 300, "sequential": True, "workdir": "/shared/campaign",
        "ensembles": [{"name": "alpha", "parameter": "angleOfAttack", "values": [0, 2], "nodes": 2}],
    }  # fmt: skip
    del spec["malleable"]  # a malleable run cannot share the cluster with the rest: its own fixture below
    # a campaign runs its own members: the runner has no command of its own, nor the multiplexer
    container["command"] = ""
    spec["multiplexing"]["command"] = ""
    return {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "full", "namespace": "hpc"},
        "spec": spec,
    }


def _malleable_set() -> dict[str, Any]:
    """Every field of spec.malleable set to a value other than its default (a run of its own)."""
    malleable = {
        "trace": "lublin", "jobs": 8, "first": 16, "policy": "min", "malleablePercent": 50.0, "seed": 3,
        "arrivals": 30.0, "medianRuntime": 20.0, "runtimeMin": 5.0, "runtimeMax": 60.0, "iterations": 200,
        "resizeTimeout": 10.0, "workdir": "/shared/malleable",
    }  # fmt: skip
    spec = {"size": 4, "interactive": True, "containers": [{"image": "app:1"}], "malleable": malleable}
    return {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": "m"}, "spec": spec}


def test_everything_set_fixture_sets_every_field() -> None:
    mc = load_minicluster(_everything_set())
    assert mc.spec.model_fields_set == set(MiniClusterSpec.model_fields) - {"malleable"}
    malleable = load_minicluster(_malleable_set()).spec.malleable
    assert malleable is not None and malleable.model_fields_set == set(type(malleable).model_fields)


def test_a_malleable_run_round_trips_through_the_flux_operator() -> None:
    ours = load_minicluster(_malleable_set())
    assert from_flux_operator(to_flux_operator(ours)).spec == ours.spec


def test_round_trip_through_flux_operator_keeps_every_field() -> None:
    ours = load_minicluster(_everything_set())
    theirs = to_flux_operator(ours)
    assert theirs["apiVersion"] == "flux-framework.org/v1alpha2"
    assert "flavour" not in theirs["spec"].get("flux", {})  # not a field the operator knows
    back = from_flux_operator(theirs)
    assert back.spec == ours.spec
    assert back.metadata == ours.metadata


def test_our_extensions_ride_in_an_annotation() -> None:
    data = _everything_set()
    data["spec"]["flux"]["flavour"] = "flux"
    data["spec"]["flux"]["bursting"]["plugins"] = []  # the flux flavour bursts to the operator's static hosts only
    theirs = to_flux_operator(load_minicluster(data))
    carried = json.loads(theirs["metadata"]["annotations"][EXTENSIONS_ANNOTATION])
    assert carried["flux.flavour"] == "flux" and carried["restful"]["mode"] == "multi-user"
    assert "restful" not in theirs["spec"]  # not a field the operator knows
    back = from_flux_operator(theirs)
    assert back.spec.flux.flavour == "flux" and back.spec.restful.port == 5001


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_examples_round_trip_both_ways(path: Path) -> None:
    mc = load_minicluster_file(path)
    assert from_flux_operator(to_flux_operator(mc)).spec == mc.spec
    ours = load_minicluster(to_ours(mc))
    assert ours.api_version == "miniclusters.dev/v1alpha1"
    assert ours.spec == mc.spec
