"""Every example loads; Flux Operator files load unchanged with the operator's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from miniclusters.api import load_minicluster, load_minicluster_file
from miniclusters.api.spec import (
    DEFAULT_APP_IMAGE,
    DEFAULT_BACKOFF_LIMIT,
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_FLUX_VIEW_IMAGE,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_there_are_the_four_kinds_of_example() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {"hello", "interactive", "elastic", "flux-operator-lammps"} <= names
    elastic = load_minicluster_file(ROOT / "examples/elastic.yaml")
    assert elastic.spec.effective_max_size > elastic.spec.size
    assert load_minicluster_file(ROOT / "examples/interactive.yaml").spec.interactive


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_loads(path: Path) -> None:
    mc = load_minicluster_file(path)
    raw = yaml.safe_load(path.read_text())
    assert mc.name == raw["metadata"]["name"]
    assert mc.spec.size == raw["spec"].get("size", 1)


def test_flux_operator_file_is_accepted_unchanged() -> None:
    path = ROOT / "examples/flux-operator-lammps.yaml"
    raw = yaml.safe_load(path.read_text())
    assert raw["apiVersion"] == "flux-framework.org/v1alpha2"
    mc = load_minicluster(raw)
    assert mc.api_version == "flux-framework.org/v1alpha2"
    container = mc.spec.containers[0]
    assert container.working_dir == "/opt/lammps/examples/reaxff/HNS"
    assert container.resources.requests["memory"] == "2Gi"
    assert container.volumes["data"].claim_name == "lammps-data"
    assert mc.spec.flux.connect_timeout == "10s"


def test_defaults_are_the_operators(minimal_spec: dict) -> None:
    del minimal_spec["spec"]["size"]
    mc = load_minicluster(minimal_spec)
    spec = mc.spec
    assert spec.size == 1 and spec.effective_max_size == 1 and spec.tasks == 1
    assert spec.deadline_seconds == DEFAULT_DEADLINE_SECONDS == 31500000
    assert spec.backoff_limit == DEFAULT_BACKOFF_LIMIT == 100
    assert spec.flux.connect_timeout == "5s" and spec.flux.log_level == 6
    assert spec.flux.container.image == DEFAULT_FLUX_VIEW_IMAGE
    assert spec.flux.container.mount_path == "/mnt/flux" and spec.flux.container.name == "flux-view"
    assert spec.flux.bursting.lead_broker is None
    assert spec.containers[0].image == "app:1"
    assert DEFAULT_APP_IMAGE.startswith("ghcr.io/")
    assert mc.headless_name == "demo"  # network.headlessName defaults to metadata.name
    assert spec.flux.flavour == "builtin"
    assert spec.quorum == 1


def test_single_container_runs_flux_implicitly(minimal_spec: dict) -> None:
    mc = load_minicluster(minimal_spec)
    assert mc.spec.flux_runner_index == 0


def test_volumes_are_a_map_keyed_by_name(minimal_spec: dict) -> None:
    minimal_spec["spec"]["containers"][0]["volumes"] = {
        "scratch": {"emptyDir": True, "path": "/scratch"},
        "cfg": {"configMapName": "app-config", "items": {"a": "a.txt"}, "path": "/cfg"},
    }
    mc = load_minicluster(minimal_spec)
    volumes = mc.spec.containers[0].volumes
    assert set(volumes) == {"scratch", "cfg"}
    assert volumes["cfg"].items == {"a": "a.txt"}


def test_status_from_kubectl_get_is_accepted(minimal_spec: dict) -> None:
    minimal_spec["status"] = {"size": 2, "selector": "job-name=demo", "maximumSize": 2, "conditions": []}
    assert load_minicluster(minimal_spec).status is not None
