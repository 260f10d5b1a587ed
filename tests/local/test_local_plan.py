"""Pure planning rules of the local backend (no root needed): CPU weights as the kubelet maps them, nice levels,
addresses that avoid existing routes, cgroup detection, and the rendered broker config for local pods."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

import pytest

from elasticity.model import cpu as cpu_model
from miniclusters.api import load_minicluster
from miniclusters.api.hosts import HostRegistry
from miniclusters.backends.local import cgroups, plan
from miniclusters.render.broker_config import render_broker_toml


@pytest.mark.parametrize(
    ("milli", "shares"), [(0, 2), (1, 2), (100, 102), (250, 256), (500, 512), (1000, 1024), (300000, 262144)]
)
def test_cpu_shares_follow_the_kubelet(milli: int, shares: int) -> None:
    assert cpu_model.milli_to_shares(milli) == shares


def test_shares_read_back_as_the_request() -> None:
    for milli in (100, 250, 500, 750, 1000, 2500):
        assert cpu_model.shares_to_milli(cpu_model.milli_to_shares(milli)) == milli


def test_cgroup_v2_weights() -> None:
    # REFERENCE.md 4: one CPU is weight 100 under the non-linear formula; 1000m:100m gives 100:17, not 10:1
    assert cpu_model.milli_to_weight(1000) == 100
    assert cpu_model.milli_to_weight(100) == 17
    assert cpu_model.milli_to_weight(1000, "linear") == 1 + (1022 * 9999) // 262142 == 39
    assert cpu_model.milli_to_weight(0) == 1 and cpu_model.milli_to_weight(10**6) == 10000
    for formula in ("linear", "nonlinear"):
        weight = cpu_model.milli_to_weight(500, formula)
        assert cpu_model.weight_to_milli(weight, formula, hint=500) == 500
        assert cpu_model.milli_to_weight(cpu_model.weight_to_milli(weight, formula), formula) == weight
    with pytest.raises(ValueError, match="linear or nonlinear"):
        cpu_model.milli_to_weight(1, "cubic")


def test_nice_levels_approximate_the_ratios() -> None:
    assert cpu_model.milli_to_nice(1000) == 0
    assert cpu_model.milli_to_nice(500) == 3  # 1.25**3 ~ 1.95
    assert cpu_model.milli_to_nice(2000) == -3
    assert cpu_model.milli_to_nice(0) == 19
    assert cpu_model.nice_to_milli(0) == 1000


def test_slots_avoid_other_clusters_and_routes() -> None:
    routes = [ipaddress.IPv4Network("10.213.2.0/24"), ipaddress.IPv4Network("192.0.2.0/24")]
    chosen = plan.choose_slot([1], routes)
    assert chosen.slot == 3 and str(chosen.network) == "10.213.3.0/24"
    assert str(chosen.gateway) == "10.213.3.1" and str(chosen.pod_address(0)) == "10.213.3.2"
    loop = plan.choose_slot([1, 2], [], loopback=True)
    assert str(loop.pod_address(1)) == "127.213.3.3"
    assert len(plan.veth_name(254, 249) + "p") <= 15


def test_covering_route_leaves_no_slot() -> None:
    with pytest.raises(RuntimeError, match="no free /24"):
        plan.choose_slot([], [ipaddress.IPv4Network("10.0.0.0/8")])


def test_hosts_file_names_every_preregistered_pod() -> None:
    text = plan.addressing_for(7, loopback=False).hosts_file(HostRegistry("demo", 3))
    assert "10.213.7.2\tdemo-0" in text and "10.213.7.4\tdemo-2" in text and "localhost" in text


MOUNTS_V1 = """cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0
"""


def test_detect_prefers_the_v1_cpu_mount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    driver = cgroups.detect(MOUNTS_V1.replace("/sys/fs/cgroup/cpu", str(cpu)))
    assert driver is not None and driver.version == 1 and driver.knob == "cpu.shares"
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    driver = cgroups.detect(f"cgroup2 {v2} cgroup2 rw 0 0\n", v2_formula="linear")
    assert driver is not None and driver.version == 2 and driver.knob == "cpu.weight"
    assert cgroups.detect("proc /proc proc rw 0 0\n") is None


def test_v2_driver_hands_the_cpu_controller_down(tmp_path: Path) -> None:
    root = tmp_path
    for directory in (root / "miniclusters", root / "miniclusters" / "demo"):
        directory.mkdir(parents=True)
        (directory / "cgroup.subtree_control").write_text("")
    driver = cgroups.CgroupDriver(2, root)
    pod = driver.create("demo", 1, 250)
    assert (root / "miniclusters" / "cgroup.subtree_control").read_text() == "+cpu"
    assert (pod / "cpu.weight").read_text() == str(cpu_model.milli_to_weight(250))
    assert driver.read_weight("demo", 1) == cpu_model.milli_to_weight(250)
    assert driver.milli_for(driver.read_weight("demo", 1) or 0, hint=250) == 250


def test_local_broker_config_keeps_kubernetes_output(minimal_spec: dict) -> None:
    mc = load_minicluster(minimal_spec)
    kubernetes = render_broker_toml(mc, "hpc")
    assert 'default_connect = "tcp://%h.demo.hpc.svc.cluster.local:%p"' in kubernetes
    assert 'curve_cert = "/etc/flux/curve/curve.cert"' in kubernetes
    local = tomllib.loads(render_broker_toml(mc, "local", curve_cert="/s/curve.cert", default_connect="tcp://%h:%p"))
    assert local["bootstrap"]["default_connect"] == "tcp://%h:%p"
    assert local["bootstrap"]["curve_cert"] == "/s/curve.cert"
    assert local["bootstrap"]["default_bind"] == "tcp://eth0:%p"
    hosts = [{"host": "demo-0", "bind": "tcp://127.213.1.2:8050", "connect": "tcp://127.213.1.2:8050"}]
    assert tomllib.loads(render_broker_toml(mc, "local", hosts=hosts))["bootstrap"]["hosts"] == hosts
