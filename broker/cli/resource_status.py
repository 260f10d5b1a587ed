"""`flux resource status`: the instance's nodes by state (avail, exclude, draining, drained, torpid, ...), online
or offline, in flux-core's table form. Pure functions over the broker's answers; commands.py does the I/O.

Our broker has no excluded, torpid or housekeeping ranks and records no drain reason or time, so those
states are always empty and REASON is blank; online/offline are its up/down ranks, allocated the ranks of
running jobs, and a drained rank still running a job is `draining`, as in Flux.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.payloads import QueueState, ResourceStatus

from ..errors import InputError
from .output_format import OutputFormat

FORMATS = {
    "default": (
        "Default flux-resource status format string",
        "{state:>12} {color_up}{up:>2}{color_off} {nnodes:>6} {nodelist}",
    ),
    "long": (
        "Long flux-resource status format string",
        "{state:>12} {color_up}{up:>2}{color_off} {nnodes:>6} +:{reason:<30.30} {nodelist}",
    ),
}
FORMAT_ENV = "FLUX_RESOURCE_STATUS_FORMAT_DEFAULT"  # flux-core's override of the default format
VALID_STATES = (
    "all",
    "online",
    "avail",
    "offline",
    "exclude",
    "drain",
    "draining",
    "drained",
    "torpid",
    "allocated",
    "housekeeping",
)
DEFAULT_STATES = "avail,exclude,draining,drained,torpid,housekeeping"
HEADINGS = {
    "state": "STATE",
    "statex": "STATE",
    "nnodes": "NNODES",
    "ranks": "RANKS",
    "nodelist": "NODELIST",
    "reason": "REASON",
    "timestamp": "TIME",
    "status": "STATUS",
    "up": "UP",
    "up.ascii": "UP",
    "color_up": "",
    "color_off": "",
}
_GREEN, _RED, _OFF = "\033[01;32m", "\033[01;31m", "\033[0;0m"


class StatusError(InputError):
    """Bad --states or --format; `hint` is a second line (flux-core logs it at INFO)."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class UpMark:
    """The UP column: a check or a cross, `{up.ascii}` spells it y or n."""

    default: str
    ascii: str

    def __str__(self) -> str:
        return self.default

    def __format__(self, spec: str) -> str:
        return format(self.default, spec)


@dataclass
class StatusLine:
    """One row: the ranks in `statex` that are online (or offline), with the drain reason when there is one."""

    statex: str
    online: bool
    rank_set: set[int]
    hostname: Callable[[int], str] = field(repr=False)
    reason: str = ""
    timestamp: str = ""

    @property
    def state(self) -> str:
        return self.statex if self.online else self.statex + "*"

    @property
    def offline(self) -> bool:
        return not self.online

    @property
    def status(self) -> str:
        return "online" if self.online else "offline"

    @property
    def up(self) -> UpMark:
        return UpMark("✔", "y") if self.online else UpMark("✗", "n")

    @property
    def color_up(self) -> str:
        return _GREEN if self.online else _RED

    @property
    def color_off(self) -> str:
        return _OFF

    @property
    def nnodes(self) -> int:
        return len(self.rank_set)

    @property
    def ranks(self) -> str:
        from common import idset

        return idset.encode(sorted(self.rank_set))

    @property
    def nodelist(self) -> str:
        from ..bootstrap import compress_hosts

        return compress_hosts([self.hostname(rank) for rank in sorted(self.rank_set)])


@dataclass
class Snapshot:
    """Rank sets of each state, as flux's ResourceStatus derives them."""

    all: set[int]
    online: set[int]
    offline: set[int]
    allocated: set[int]
    drain: set[int]
    hostnames: list[str]
    exclude: set[int] = field(default_factory=set)
    torpid: set[int] = field(default_factory=set)
    housekeeping: set[int] = field(default_factory=set)

    @property
    def draining(self) -> set[int]:
        return self.drain & self.allocated

    @property
    def drained(self) -> set[int]:
        return self.drain - self.allocated

    @property
    def avail(self) -> set[int]:
        return self.all - self.exclude - self.drain - self.torpid

    def hostname(self, rank: int) -> str:
        return self.hostnames[rank] if rank < len(self.hostnames) else str(rank)

    def restricted(self, ranks: set[int]) -> Snapshot:
        """Only `ranks` (--include)."""
        return Snapshot(
            self.all & ranks,
            self.online & ranks,
            self.offline & ranks,
            self.allocated & ranks,
            self.drain & ranks,
            self.hostnames,
            self.exclude & ranks,
            self.torpid & ranks,
            self.housekeeping & ranks,
        )


def snapshot(status: ResourceStatus, queue_state: QueueState | None) -> Snapshot:
    """From the lead's `resource.status` and `job-manager.queue-state` answers (None when there is no job
    manager: nothing allocated or drained)."""
    from common import idset

    up = set(idset.decode(status["up"]))
    down = set(idset.decode(status["down"]))
    allocated: set[int] = set()
    drained: set[int] = set()
    if queue_state:
        for job in queue_state.get("running", []):
            allocated.update(int(rank) for rank in job.get("ranks", []))
        drained = {int(rank) for rank in queue_state.get("drained", [])}
    return Snapshot(up | down, up, down, allocated & up, drained, list(status["hostnames"]))


def state_list(states: str | None) -> list[str]:
    """--states as flux-core reads it: checked, online/offline alone mean those with the default states,
    `drain` means draining and drained."""
    wanted = (states or DEFAULT_STATES).split(",")
    for state in wanted:
        if state not in VALID_STATES:
            raise StatusError(f"Invalid resource state {state} specified", f"valid states: {','.join(VALID_STATES)}")
    if not [s for s in wanted if s not in ("online", "offline")]:
        wanted += DEFAULT_STATES.split(",")
    if "drain" in wanted:
        wanted.remove("drain")
        wanted += ["draining", "drained"]
    return wanted


def format_string(name: str) -> str:
    """-o/--format: a format string, or the name of one (default, long); $FLUX_RESOURCE_STATUS_FORMAT_DEFAULT
    replaces the default, as in flux-core."""
    if "{" in name:
        return name
    if name == "default":
        name = os.environ.get(FORMAT_ENV) or name
        if "{" in name:
            return name
    if name not in FORMATS:
        guess = "".join(f"{{{word}}}" if word.isidentifier() else word for word in _words(name))
        raise StatusError(f"--format: No such format {name} (Did you mean '{guess}'?)")
    return FORMATS[name][1]


def _words(text: str) -> list[str]:
    import re

    return re.split(r"(\W+)", text)


def format_help() -> str:
    lines = ["", "Configured flux-resource output formats:", ""]
    lines += [f"  {name:<12} {description}" for name, (description, _) in FORMATS.items()]
    return "\n".join(lines)


def status_lines(
    snap: Snapshot, states: list[str], fmt: OutputFormat, explicit_states: bool, skip_empty: bool
) -> list[StatusLine]:
    """The rows flux-core prints, in its order, rows alike but for their nodes merged into one.

    Empty rows are left out unless --states was given (and --skip-empty was not); empty offline rows unless
    `offline` was asked for. Naming online or offline alone shows only those.
    """
    online_too = "online" in states or "offline" not in states
    offline_too = "offline" in states or "online" not in states
    wanted = set(states)
    for drain_state in ("draining", "drained"):  # a drained rank shows as drained, not also as torpid
        if wanted & {"all", drain_state}:
            snap = dataclasses.replace(snap, torpid=snap.torpid - getattr(snap, drain_state))
    key_format = fmt.without(["nodelist", "ranks", "nnodes"], nullify_expansion=True)
    merged: dict[str, StatusLine] = {}
    order: list[StatusLine] = []

    def add(line: StatusLine) -> None:
        key = key_format.format(line)
        if key in merged:
            merged[key].rank_set |= line.rank_set
        else:
            merged[key] = line
            order.append(line)

    def included(online: bool) -> bool:
        return online_too if online else offline_too

    for state in ("avail", "exclude", "allocated", "torpid", "housekeeping"):
        if not wanted & {state, "all"}:
            continue
        for online in (True, False):
            if included(online):
                members = getattr(snap, state) & (snap.online if online else snap.offline)
                add(StatusLine(state, online, set(members), snap.hostname))
    for state in ("draining", "drained"):
        if not wanted & {state, "all"}:
            continue
        ranks = getattr(snap, state)
        if not ranks and included(True):
            add(StatusLine(state, True, set(), snap.hostname))
        for rank in sorted(ranks):
            if included(rank in snap.online):
                add(StatusLine(state, rank in snap.online, {rank}, snap.hostname))
    skip_all_empty = skip_empty or not explicit_states
    skip_offline_empty = "offline" not in states
    return [line for line in order if line.nnodes or not (skip_all_empty or (line.offline and skip_offline_empty))]


def include_ranks(snap: Snapshot, targets: str) -> set[int]:
    """-i/--include: an idset of ranks, else a hostlist of node names."""
    import hostlist

    from common import idset

    try:
        return set(idset.decode(targets))
    except ValueError:
        pass
    try:
        names = set(hostlist.expand_hostlist(targets))
    except hostlist.BadHostlist as exc:
        raise StatusError(f"--include: {targets!r} is neither an idset nor a hostlist: {exc}") from None
    return {rank for rank in snap.all if snap.hostname(rank) in names}
