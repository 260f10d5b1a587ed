"""The one-node cluster's rendered configuration: what this machine needs is there, paths follow the layout."""

from __future__ import annotations

import json
import tomllib
from ipaddress import IPv4Address
from pathlib import Path

import yaml

from miniclusters.localkube import components, configs
from miniclusters.localkube.layout import Layout


def _layout(tmp_path: Path) -> Layout:
    return Layout(
        cache=tmp_path / "cache",
        state=tmp_path / "state",
        run=tmp_path / "run",
        node_name="node-a",
        node_address=IPv4Address("192.0.2.10"),
    )


def test_kubelet_runs_on_cgroup_v1_with_cgroupfs(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    config = yaml.safe_load(configs.kubelet_config(layout))
    assert config["kind"] == "KubeletConfiguration"
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["containerRuntimeEndpoint"] == f"unix://{layout.containerd_socket}"
    assert config["clusterDNS"] == ["10.244.0.1"] and config["clusterDomain"] == "cluster.local"
    assert config["authentication"]["anonymous"]["enabled"] is False


def test_containerd_uses_runc_on_cgroupfs_and_our_sandbox_and_network(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    config = tomllib.loads(configs.containerd_config(layout))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == configs.PAUSE_IMAGE
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert cri["cni"]["conf_dir"] == str(layout.cni_config)
    assert config["grpc"]["address"] == str(layout.containerd_socket)
    assert cri["restrict_oom_score_adj"] is True  # no CAP_SYS_RESOURCE on this machine
    assert config["root"].startswith(str(tmp_path))


def test_cni_bridge_gives_pods_the_pod_network(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    conflist = json.loads(configs.cni_conflist(layout))
    (bridge,) = conflist["plugins"]
    assert bridge["type"] == "bridge" and bridge["bridge"] == layout.bridge
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.0.0/24", "gateway": "10.244.0.1"}]]


def test_coredns_serves_the_cluster_domain_on_the_bridge(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    corefile = configs.corefile(layout)
    assert "kubernetes cluster.local" in corefile
    assert corefile.count("bind 10.244.0.1") == 2
    assert str(layout.component_kubeconfig("coredns")) in corefile


def test_kubeconfig_names_the_user_certificate(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    config = yaml.safe_load(configs.kubeconfig(layout, "admin"))
    assert config["clusters"][0]["cluster"]["server"] == "https://192.0.2.10:6443"
    assert config["users"][0]["user"]["client-certificate"] == str(layout.pki / "admin.crt")


def test_components_start_in_dependency_order_from_make_kube_binaries(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    names = [component.name for component in components.all_components(layout)]
    assert names.index("etcd") < names.index("kube-apiserver") < names.index("kube-controller-manager")
    assert names.index("containerd") < names.index("kubelet") < names.index("coredns")
    apiserver = components.apiserver(layout).argv
    assert apiserver[0] == str(layout.binary("kube-apiserver"))
    assert f"--etcd-servers={layout.etcd_url}" in apiserver
    assert "--authorization-mode=Node,RBAC" in apiserver
