"""Read the `[bootstrap]` TOML that real Flux reads (flux-config-bootstrap(5)) and answer rank/URI questions.

The same rendered ConfigMap serves both broker flavours, so this parser accepts exactly Flux's keys and
reports any problem naming the file and the field.
"""

from __future__ import annotations

import functools
import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

import hostlist

from broker.errors import InputError

_HOST_KEYS = {"host", "bind", "connect", "parent"}
_BOOTSTRAP_KEYS = {"curve_cert", "default_port", "default_bind", "default_connect", "hosts", "enable_ipv6"}


class HostTable(TypedDict, total=False):
    """One table of [bootstrap] hosts as Flux documents it (`host` a hostlist expression)."""

    host: str
    bind: str
    connect: str
    parent: str


class BootstrapTable(TypedDict, total=False):
    """[bootstrap] as Flux documents it (flux-config-bootstrap(5))."""

    hosts: list[HostTable]
    curve_cert: str
    default_port: int
    default_bind: str
    default_connect: str
    enable_ipv6: bool


class TbonTable(TypedDict, total=False):
    """[tbon]: the tree's shape (`topo`, e.g. "kary:2")."""

    topo: str


class ConfigTables(TypedDict, total=False):
    """The config tables the broker reads. The files are the user's: other tables pass unread, and each value
    read is checked (parse_bootstrap) before it is believed to have the type written here."""

    bootstrap: BootstrapTable
    tbon: TbonTable


class BootstrapError(InputError):
    """A bootstrap configuration problem; the message names the file and field."""


@dataclass(frozen=True)
class HostEntry:
    """One rank's line of the hosts array after hostlist expansion."""

    host: str
    bind: str | None = None
    connect: str | None = None
    parent: str | None = None


@dataclass(frozen=True)
class BootstrapConfig:
    """The parsed `[bootstrap]` table; hosts[i] describes rank i."""

    hosts: tuple[HostEntry, ...]
    default_port: int | None = None
    default_bind: str | None = None
    default_connect: str | None = None
    curve_cert: str | None = None
    source: str = "<config>"
    singleton: bool = False
    topo: str | None = None
    """[tbon] topo: the tree shape the config states (tbon.topo / tbon.fanout on the command line win)."""

    @property
    def size(self) -> int:
        return len(self.hosts)

    @functools.cached_property
    def hostnames(self) -> list[str]:
        """Each rank's hostname (computed once: a broker of N asks for it often; do not change the list)."""
        return [entry.host for entry in self.hosts]

    @functools.cached_property
    def _rank_index(self) -> dict[str, int]:
        """hostname -> its first rank: a broker finds its own rank without a scan of every host."""
        index: dict[str, int] = {}
        for rank, name in enumerate(self.hostnames):
            index.setdefault(name, rank)
        return index

    @functools.cached_property
    def _hostlist(self) -> str:
        return compress_hosts(self.hostnames)

    def hostlist(self) -> str:
        return self._hostlist

    def rank_of(self, hostname: str) -> int:
        """The rank of a hostname: exact match first, then the short name (before the first dot)."""
        for candidate in (hostname, hostname.split(".", 1)[0]):
            rank = self._rank_index.get(candidate)
            if rank is not None:
                return rank
        raise BootstrapError(
            f"{self.source}: [bootstrap] hosts: this broker's hostname {hostname!r} is not listed "
            f"(hosts = {self.hostlist()})"
        )

    def prepare(self) -> None:
        """Compute the views brokers ask for (hostnames, their ranks, the hostlist, explicit parents) now: a
        process that forks N brokers from one config (`flux start --test-size`) calls it once before forking,
        so that N brokers share one copy instead of each making its own (O(N) each, O(N^2) for the instance)."""
        if self.hosts:
            self.hostlist()
            self.rank_of(self.hosts[0].host)
            self.explicit_parents()

    def _substitute(self, template: str, rank: int, field: str) -> str:
        host = self.hosts[rank].host
        if "%p" in template and self.default_port is None:
            raise BootstrapError(f"{self.source}: [bootstrap] {field} uses %p but default_port is not set")
        out = template.replace("%%", "\0").replace("%h", host)
        out = out.replace("%p", str(self.default_port)).replace("\0", "%")
        return out

    def bind_uri(self, rank: int) -> str | None:
        """Where rank's broker listens for its children (None if neither bind nor default_bind is set)."""
        entry = self.hosts[rank]
        if entry.bind is not None:
            return self._substitute(entry.bind, rank, f"hosts[{entry.host}].bind")
        if self.default_bind is not None:
            return self._substitute(self.default_bind, rank, "default_bind")
        return None

    def connect_uri(self, rank: int) -> str | None:
        """Where children of rank connect to reach it."""
        entry = self.hosts[rank]
        if entry.connect is not None:
            return self._substitute(entry.connect, rank, f"hosts[{entry.host}].connect")
        if self.default_connect is not None:
            return self._substitute(self.default_connect, rank, "default_connect")
        return None

    def explicit_parents(self) -> dict[int, int]:
        """Ranks whose host entry carries a `parent` key, mapped to that parent's rank (do not change it)."""
        return self._explicit_parents

    @functools.cached_property
    def _explicit_parents(self) -> dict[int, int]:
        parents: dict[int, int] = {}
        for rank, entry in enumerate(self.hosts):
            if entry.parent is None:
                continue
            if entry.parent not in self._rank_index:
                raise BootstrapError(
                    f"{self.source}: [bootstrap] hosts: parent {entry.parent!r} of {entry.host!r} is not a listed host"
                )
            parents[rank] = self._rank_index[entry.parent]
        return parents


def compress_hosts(names: list[str]) -> str:
    """A hostlist expression that expands back to names in the same order (Flux keeps rank order)."""
    return _compress_hosts(tuple(names))


@functools.lru_cache(maxsize=16)
def _compress_hosts(names: tuple[str, ...]) -> str:
    """Cached: `flux start --test-size` computes it once before forking its brokers, not in each of them."""
    if not names:
        return ""
    whole = hostlist.collect_hostlist(list(names))
    if hostlist.expand_hostlist(whole) == list(names):  # the usual case: one call, not one per host
        return str(whole)
    groups: list[list[str]] = [[names[0]]]
    for name in names[1:]:
        trial = [*groups[-1], name]
        if hostlist.expand_hostlist(hostlist.collect_hostlist(trial)) == trial:
            groups[-1] = trial
        else:
            groups.append([name])
    return ",".join(hostlist.collect_hostlist(group) for group in groups)


def _read_toml_files(path: Path) -> tuple[ConfigTables, str]:
    """Flux reads every *.toml in the config directory (or one file); merge their top-level tables."""
    if path.is_dir():
        files = sorted(path.glob("*.toml"))
    elif path.exists():
        files = [path]
    else:
        raise BootstrapError(f"{path}: config path does not exist")
    merged: ConfigTables = {}
    origin: dict[str, Path] = {}
    for file in files:
        try:
            data = cast("ConfigTables", tomllib.loads(file.read_text(encoding="utf-8")))  # checked by parse_bootstrap
        except OSError as exc:
            raise BootstrapError(f"{file}: cannot read config file: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise BootstrapError(f"{file}: malformed TOML: {exc}") from None
        except UnicodeDecodeError:
            raise BootstrapError(f"{file}: config file is not UTF-8 text") from None
        for key in data:
            if key in merged:
                raise BootstrapError(f"{file}: table [{key}] is also defined in {origin[key]}")
            origin[key] = file
        merged.update(data)
    source = str(origin.get("bootstrap", files[0] if len(files) == 1 else path))
    return merged, source


def _optional_str(value: object, key: str, where: str) -> str | None:
    """A table's string `value` (None: left out), or BootstrapError naming the table and the key."""
    if value is not None and not isinstance(value, str):
        raise BootstrapError(f"{where} {key}: expected a string, got {type(value).__name__}")
    return value


def _host_entries(raw_hosts: object, where: str) -> list[HostEntry]:
    """[bootstrap] hosts: each table's hostlist expanded, one entry per host, no host twice."""
    entries: list[HostEntry] = []
    seen: dict[str, int] = {}
    if raw_hosts is not None and not isinstance(raw_hosts, list):
        raise BootstrapError(f"{where} hosts: expected an array of tables")
    for index, item in enumerate(raw_hosts or []):
        label = f"{where} hosts[{index}]"
        if not isinstance(item, dict):
            raise BootstrapError(f'{label}: expected a table like {{ host = "name" }}, got {item!r}')
        bad = sorted(set(item) - _HOST_KEYS)
        if bad:
            raise BootstrapError(f"{label}: unknown key(s): {', '.join(bad)}")
        expr = item.get("host")
        if not isinstance(expr, str) or not expr.strip():
            raise BootstrapError(f"{label}: missing or empty 'host'")
        try:
            names = hostlist.expand_hostlist(expr)
        except hostlist.BadHostlist as exc:
            raise BootstrapError(f"{label}: invalid hostlist {expr!r}: {exc}") from None
        for key in ("bind", "connect", "parent"):
            _optional_str(item.get(key), key, label)
        for name in names:
            if name in seen:
                raise BootstrapError(
                    f"{where} hosts: duplicate host {name!r} (in hosts[{seen[name]}] and hosts[{index}])"
                )
            seen[name] = index
            entries.append(
                HostEntry(host=name, bind=item.get("bind"), connect=item.get("connect"), parent=item.get("parent"))
            )
    return entries


def parse_bootstrap(data: ConfigTables, source: str = "<config>", hostname: str | None = None) -> BootstrapConfig:
    """Validate a parsed config dict; with no [bootstrap] hosts the instance is a singleton on `hostname`."""
    table = data.get("bootstrap")
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise BootstrapError(f"{source}: [bootstrap] must be a table")
    where = f"{source}: [bootstrap]"
    unknown = sorted(set(table) - _BOOTSTRAP_KEYS)
    if unknown:
        raise BootstrapError(f"{where} unknown key(s): {', '.join(unknown)}")
    port = table.get("default_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise BootstrapError(f"{where} default_port: expected an integer port 1-65535, got {port!r}")
    entries = _host_entries(table.get("hosts"), where)
    singleton = not entries
    if singleton:
        entries = [HostEntry(host=hostname or socket.gethostname())]
    tbon = data.get("tbon", {})
    if not isinstance(tbon, dict):
        raise BootstrapError(f"{source}: [tbon] must be a table")
    config = BootstrapConfig(
        topo=_optional_str(tbon.get("topo"), "topo", f"{source}: [tbon]"),
        hosts=tuple(entries),
        default_port=port,
        default_bind=_optional_str(table.get("default_bind"), "default_bind", where),
        default_connect=_optional_str(table.get("default_connect"), "default_connect", where),
        curve_cert=_optional_str(table.get("curve_cert"), "curve_cert", where),
        source=source,
        singleton=singleton,
    )
    if config.size > 1 and not config.curve_cert:
        raise BootstrapError(f"{where} curve_cert: required when there is more than one host")
    config.explicit_parents()  # validates parent names early
    return config


def load_config(path: str | Path, hostname: str | None = None) -> BootstrapConfig:
    """Read a config directory (or single TOML file) the way `flux broker --config-path` does."""
    data, source = _read_toml_files(Path(path))
    return parse_bootstrap(data, source=source, hostname=hostname)
