"""Bootstrap TOML parsing, rank lookup, URI substitution and every bad-input case."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.bootstrap import BootstrapError, compress_hosts, load_config, parse_bootstrap
from broker.netaddr import AddressError, resolve_bind

SAMPLE = """
[bootstrap]
curve_cert = "/etc/flux/curve/curve.cert"
default_port = 8050
default_bind = "tcp://eth0:%p"
default_connect = "tcp://%h.flux-sample.default.svc.cluster.local:%p"
hosts = [ { host = "flux-sample-[0-3]" } ]
"""


def write(tmp_path: Path, text: str, name: str = "broker.toml") -> Path:
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / name).write_text(text)
    return conf


def test_operator_sample_parses_and_substitutes(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, SAMPLE))
    assert cfg.size == 4
    assert cfg.hostnames == [f"flux-sample-{i}" for i in range(4)]
    assert cfg.rank_of("flux-sample-2") == 2
    assert cfg.rank_of("flux-sample-3.flux-sample.default.svc.cluster.local") == 3
    assert cfg.bind_uri(1) == "tcp://eth0:8050"
    assert cfg.connect_uri(2) == "tcp://flux-sample-2.flux-sample.default.svc.cluster.local:8050"
    assert cfg.hostlist() == "flux-sample-[0-3]"
    assert cfg.curve_cert == "/etc/flux/curve/curve.cert"


def test_per_host_keys_override_defaults(tmp_path: Path) -> None:
    text = """
[bootstrap]
curve_cert = "c"
default_port = 9000
default_bind = "tcp://*:%p"
default_connect = "tcp://%h:%p"
hosts = [
  { host = "a0", bind = "tcp://10.0.0.1:%p", connect = "tcp://10.0.0.1:%p" },
  { host = "a[1-2]", parent = "a0" },
  { host = "a3", parent = "a1" },
]
"""
    cfg = load_config(write(tmp_path, text))
    assert cfg.bind_uri(0) == "tcp://10.0.0.1:9000"
    assert cfg.connect_uri(0) == "tcp://10.0.0.1:9000"
    assert cfg.bind_uri(2) == "tcp://*:9000"
    assert cfg.connect_uri(1) == "tcp://a1:9000"
    assert cfg.explicit_parents() == {1: 0, 2: 0, 3: 1}


def test_multiple_files_merge_and_single_file_path(tmp_path: Path) -> None:
    conf = write(tmp_path, SAMPLE, "bootstrap.toml")
    (conf / "other.toml").write_text("[resource]\nnoverify = true\n")
    assert load_config(conf).size == 4
    assert load_config(conf / "bootstrap.toml").size == 4


def test_no_bootstrap_table_is_a_singleton(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "[resource]\nx = 1\n"), hostname="solo")
    assert (cfg.size, cfg.hostnames, cfg.singleton) == (1, ["solo"], True)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[bootstrap\nhosts = 3", "malformed TOML"),
        ('[bootstrap]\ncurve_cert="c"\nhosts = [ { host = "a[0-1]" }, { host = "a1" } ]', "duplicate host 'a1'"),
        ('[bootstrap]\nhosts = [ { host = "a0" }, { host = "a1" } ]', "curve_cert: required"),
        ('[bootstrap]\ndefault_port = "x"\nhosts = [ { host = "a0" } ]', "default_port"),
        ('[bootstrap]\ndefault_port = 70000\nhosts = [ { host = "a0" } ]', "default_port"),
        ('[bootstrap]\nhosts = [ { hots = "a0" } ]', "unknown key(s): hots"),
        ('[bootstrap]\nhosts = [ { host = "a[0-" } ]', "invalid hostlist"),
        ('[bootstrap]\nhosts = "a0"', "hosts: expected an array"),
        ('[bootstrap]\nhosts = [ "a0" ]', "hosts[0]: expected a table"),
        ('[bootstrap]\nport = 1\nhosts = [ { host = "a0" } ]', "unknown key(s): port"),
        ('[bootstrap]\ncurve_cert="c"\nhosts = [ { host = "a0" }, { host = "a1", parent = "zz" } ]', "parent 'zz'"),
        ('[bootstrap]\ndefault_bind = 5\nhosts = [ { host = "a0" } ]', "default_bind: expected a string"),
    ],
)
def test_bad_config_names_the_problem(tmp_path: Path, text: str, needle: str) -> None:
    conf = write(tmp_path, text)
    with pytest.raises(BootstrapError) as info:
        load_config(conf)
    assert needle in str(info.value)
    assert str(conf) in str(info.value)


def test_hostname_not_in_hosts(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, SAMPLE))
    with pytest.raises(BootstrapError, match=r"hostname 'other' is not listed \(hosts = flux-sample-\[0-3\]\)"):
        cfg.rank_of("other")


def test_percent_p_without_port_is_an_error() -> None:
    cfg = parse_bootstrap({"bootstrap": {"default_bind": "tcp://*:%p", "hosts": [{"host": "a"}]}})
    with pytest.raises(BootstrapError, match="default_port is not set"):
        cfg.bind_uri(0)


def test_missing_config_path(tmp_path: Path) -> None:
    with pytest.raises(BootstrapError, match="does not exist"):
        load_config(tmp_path / "nope")


def test_compress_hosts_keeps_rank_order() -> None:
    assert compress_hosts(["n0", "n1", "n2"]) == "n[0-2]"
    names = ["b1", "a0", "a1"]
    assert compress_hosts(names) == "b1,a[0-1]"


def test_resolve_bind_interfaces_and_literals() -> None:
    assert resolve_bind("tcp://lo:8050") == "tcp://127.0.0.1:8050"
    assert resolve_bind("tcp://*:8050") == "tcp://*:8050"
    assert resolve_bind("tcp://10.1.2.3:1") == "tcp://10.1.2.3:1"
    with pytest.raises(AddressError, match="neither a network interface"):
        resolve_bind("tcp://nosuchif0.invalid:1")
    with pytest.raises(AddressError, match="not a number"):
        resolve_bind("tcp://lo:x")
