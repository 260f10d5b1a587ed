"""The Flux Operator's bursting examples load as written: `spec.flux.bursting.clusters[].name` names a bursted
cluster whose hosts join the hostlist (the operator's pkg/flux/config.go generateHostlist), never one of our burst
plugins; the burst service's plugins are `spec.flux.bursting.plugins`, a field of ours.

The shapes below are those of flux-framework/flux-operator's examples/experimental/bursting/ (v1alpha2):
broker-gke/minicluster.yaml and broker-gke/v1/minicluster.yaml at 3caf65ce7342191aada43e2234605b8e6ce70407,
broker-eks/minicluster.yaml and broker-eks/minicluster-env.yaml at 5a21b011f06115380e768359139000d982b057e2 (which
say `interactive: true` twice), broker-compute-engine/minicluster.yaml (a hostlist instead of clusters) at 3caf65ce.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from miniclusters.api import load_minicluster, load_minicluster_file
from miniclusters.api.conversion import from_flux_operator, to_flux_operator
from miniclusters.api.hosts import registry_for
from miniclusters.cli import main
from miniclusters.render.broker_config import build_broker_config
from miniclusters.render.entrypoint import render_entrypoint
from miniclusters.render.objects import build_config_map

BROKER_GKE = """\
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: flux-sample
spec:
  size: 2
  maxSize: 4
  interactive: true
  flux:
    logLevel: 7
    bursting:
      clusters:
        - size: 4
          name: burst-0
  logging:
    zeromq: true
  services:
    - image: nginx
      name: nginx
      volumes:
        nginx-conf:
          configMapName: nginx-conf
          path: /etc/nginx/conf.d
          items:
            flux.conf: flux.conf
  containers:
    - image: rockylinux:9
      workingDir: /tmp/workflow
      commands:
        pre: |
          pip install flux-burst[kubernetes]
      environment:
        GOOGLE_APPLICATION_CREDENTIALS: /tmp/workflow/application_default_credentials.json
      resources:
        limits:
          cpu: "1"
        requests:
          cpu: "1"
"""

BROKER_EKS_ENV = """\
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: flux-sample
spec:
  size: 2
  maxSize: 4
  interactive: true
  flux:
    logLevel: 7
    bursting:
      clusters:
        - size: 4
          name: burst-0
  interactive: true
  logging:
    zeromq: true
  containers:
    - image: rockylinux:9
      workingDir: /tmp/workflow
      secrets:
        AWS_ACCESS_KEY_ID:
          name: flux-operator-burst
          key: AWS_ACCESS_KEY_ID
      resources:
        limits:
          cpu: "1"
        requests:
          cpu: "1"
"""

BROKER_COMPUTE_ENGINE = """\
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: flux-sample
spec:
  size: 2
  maxSize: 4
  interactive: true
  flux:
    logLevel: 7
    bursting:
      hostlist: "flux-sample-[0-3],gffw-compute-a-[001-003]"
  containers:
    - image: rockylinux:9
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "minicluster.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", [BROKER_GKE, BROKER_EKS_ENV], ids=["broker-gke", "broker-eks-env"])
def test_validate_accepts_the_operators_bursting_examples_as_written(tmp_path: Path, text: str) -> None:
    result = CliRunner().invoke(main, ["validate", str(_write(tmp_path, text))])
    assert result.exit_code == 0, result.output
    assert "valid MiniCluster 'flux-sample'" in result.output


@pytest.mark.parametrize("text", [BROKER_GKE, BROKER_EKS_ENV], ids=["broker-gke", "broker-eks-env"])
def test_a_bursted_cluster_s_hosts_follow_the_pods_as_the_operator_renders_them(tmp_path: Path, text: str) -> None:
    mc = load_minicluster_file(_write(tmp_path, text))
    registry = registry_for(mc)
    # the operator: fmt.Sprintf("%s-[%s]", name, generateRange(maxSize, 0)) then each cluster's, comma-joined
    assert registry.hostlist() == "flux-sample-[0-3],burst-0-[0-3]"
    assert registry.hostnames()[4:] == ["burst-0-0", "burst-0-1", "burst-0-2", "burst-0-3"]
    assert registry.rank_of("burst-0-3") == 7 and registry.pods == 4  # pods still scale to maxSize only
    for flavour in ("builtin", "flux"):
        mc.spec.flux.flavour = flavour
        config = build_broker_config(mc, "default", "cluster.local")
        assert config["bootstrap"]["hosts"] == [{"host": "flux-sample-[0-3],burst-0-[0-3]"}]
        # flux-core's R covers the bursted hosts too (the operator encodes R from the same hostlist)
        encoded = "flux R encode --hosts='flux-sample-[0-3],burst-0-[0-3]' --local" in render_entrypoint(mc)
        assert encoded == (flavour == "flux")
        # a cluster name is not a plugin: no burst service, no spec for it in the ConfigMap
        assert "bursting.service" not in render_entrypoint(mc)
        assert "minicluster.json" not in build_config_map(mc, "default", "cluster.local")["data"]


def test_the_operator_s_defaults_name_burst_n_and_size_spec_size() -> None:
    data: dict[str, Any] = yaml.safe_load(BROKER_GKE)
    data["spec"]["flux"]["bursting"]["clusters"] = [{"name": "far", "size": 1}, {}, {"size": 3}]
    registry = registry_for(load_minicluster(data))
    assert registry.hostlist() == "flux-sample-[0-3],far-0,burst-1-[0-1],burst-2-[0-2]"


def test_the_static_hostlist_example_loads_and_is_the_registry(tmp_path: Path) -> None:
    mc = load_minicluster_file(_write(tmp_path, BROKER_COMPUTE_ENGINE))
    assert registry_for(mc).hostnames()[-3:] == ["gffw-compute-a-001", "gffw-compute-a-002", "gffw-compute-a-003"]


def test_our_plugins_field_runs_the_burst_service_beside_bursted_clusters() -> None:
    data: dict[str, Any] = yaml.safe_load(BROKER_GKE)
    data["spec"]["flux"]["bursting"]["plugins"] = [{"name": "kubernetes", "size": 4}, {"name": "local"}]
    mc = load_minicluster(data)
    assert "--plugins kubernetes,local" in render_entrypoint(mc)
    assert "minicluster.json" in build_config_map(mc, "default", "cluster.local")["data"]
    assert registry_for(mc).hostlist() == "flux-sample-[0-3],burst-0-[0-3]"  # the operator's hosts, unchanged
    # the operator has no `plugins`: it rides in our extensions annotation and comes back
    theirs = to_flux_operator(mc)
    assert "plugins" not in theirs["spec"]["flux"]["bursting"]
    assert theirs["spec"]["flux"]["bursting"]["clusters"] == [{"name": "burst-0", "size": 4}]
    assert from_flux_operator(theirs).spec == mc.spec


def test_bursted_clusters_are_the_flux_flavour_s_static_bursting_too() -> None:
    data: dict[str, Any] = yaml.safe_load(BROKER_GKE)
    data["spec"]["flux"]["flavour"] = "flux"
    toml = tomllib.loads(build_config_map(load_minicluster(data), "hpc", "cluster.local")["data"]["broker.toml"])
    assert toml["bootstrap"]["hosts"] == [{"host": "flux-sample-[0-3],burst-0-[0-3]"}]


def test_the_local_backend_refuses_bursted_clusters_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their hosts are brought by MiniClusters in other Kubernetes clusters; locally one bursts with `plugins`."""
    state = tmp_path / "state"
    monkeypatch.setenv("MINICLUSTERS_STATE_DIR", str(state))
    result = CliRunner().invoke(main, ["up", str(_write(tmp_path, BROKER_GKE)), "--backend", "local", "--detach"])
    assert result.exit_code == 2, result.output
    assert "spec.flux.bursting.clusters:" in result.stderr and "spec.flux.bursting.plugins" in result.stderr
    assert not state.exists() or not any(state.rglob("*.json"))
