"""Client subcommands of `flux` (click): resource (list, status, ...), overlay, getattr, lsattr, uptime, ping,
shutdown, event."""

from __future__ import annotations

import getpass
import json
import sys
import time
from typing import cast

import click

from broker.payloads import OverlayStatus, QueueState, ResourceStatus

from ..client import FluxError, Handle
from ..jsondepth import depth_problem, too_deep
from ..protocol import NODEID_ANY
from ..rest.topics import Answer, Topic
from .resource_render import drain_rows as drain_rows
from .resource_render import render_overlay as render_overlay
from .resource_render import resource_rows as resource_rows
from .topics import (
    ATTR_GET,
    DRAIN,
    EVENT_PUBLISH,
    JOB_LIST,
    OVERLAY_STATUS,
    QUEUE_STATE,
    RESOURCE_R,
    RESOURCE_STATUS,
    SHUTDOWN,
    UPTIME,
    Request,
)


def _handle() -> Handle:
    try:
        return Handle()
    except FluxError as exc:
        raise click.ClickException(str(exc)) from None


def _rpc(topic: Topic[Answer], payload: Request | None = None, nodeid: int = NODEID_ANY) -> Answer:
    """The answer, in the shape of the topic's (cast here, where it enters); a failure is the command's error."""
    with _handle() as handle:
        try:
            answer = handle.rpc(topic.name, None if payload is None else dict(payload), nodeid=nodeid, timeout=10.0)
        except FluxError as exc:
            raise click.ClickException(f"{topic.name}: {exc}") from None
    return cast(Answer, answer)


def _resource_status(nodeid: int = NODEID_ANY) -> ResourceStatus:
    return _rpc(RESOURCE_STATUS, nodeid=nodeid)


def _overlay_status() -> OverlayStatus:
    return _rpc(OVERLAY_STATUS)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Talk to the Flux instance at $FLUX_URI."""


# ------------------------------------------------------------------------------------------ resource
@cli.group()
def resource() -> None:
    """Show the instance's resources."""


def _allocated() -> dict[int, int]:
    """Cores held by running jobs, per rank (from the job manager; none when it is not loaded here)."""
    try:
        reply = _rpc(JOB_LIST, {"states": 16 | 32, "max_entries": 0})  # RUN | CLEANUP
    except click.ClickException:
        return {}
    held: dict[int, int] = {}
    for job in reply.get("jobs", []):
        for rank, cores in (job.get("allocation") or {}).items():
            held[int(rank)] = held.get(int(rank), 0) + int(cores)
    return held


@resource.command("list")
def resource_list() -> None:
    """Free, allocated, drained and down nodes and cores."""
    status = _resource_status()
    queue_state = _queue_state()
    drained = {int(rank) for rank in queue_state.get("drained", [])} if queue_state else set()
    click.echo(f"{'STATE':>10} {'NNODES':>6} {'NCORES':>8} {'NGPUS':>8} NODELIST")
    for state, nnodes, ncores, ngpus, nodelist in resource_rows(status, _allocated(), drained):
        click.echo(f"{state:>10} {nnodes:>6} {ncores:>8} {ngpus:>8} {nodelist}".rstrip())


@resource.command("status")
@click.option("-o", "--format", "fmt", default="default", help="Format string or name (default, long, help).")
@click.option("-s", "--states", "--state", "states", metavar="STATE,...", help="Only these states (help: list).")
@click.option("-i", "--include", metavar="TARGETS", help="Only these ranks (an idset) or hosts (a hostlist).")
@click.option("-q", "--queue", metavar="QUEUE,...", help="Not supported: this broker has no named queues.")
@click.option("-n", "--no-header", is_flag=True, help="No header row.")
@click.option(
    "-L", "--color", default=None, is_flag=False, flag_value="always", metavar="WHEN", help="always|never|auto"
)
@click.option("--skip-empty", is_flag=True, help="Leave out empty rows even with --states.")
def resource_status(
    fmt: str, states: str | None, include: str | None, queue: str | None, no_header: bool, color: str | None,
    skip_empty: bool,
) -> None:  # fmt: skip
    """Nodes by state (avail, drained, ...), online or not, as flux-core prints them."""
    import os

    from . import resource_status as rs
    from .output_format import FormatError, OutputFormat

    def fail(message: str, hint: str = "") -> None:
        click.echo(f"flux-resource: ERROR: {message}", err=True)
        if hint:
            click.echo(f"flux-resource: INFO: {hint}", err=True)
        raise click.exceptions.Exit(2)

    if queue is not None:
        fail("--queue: this broker has no named queues")
    if states == "help":
        click.echo(f"flux-resource: INFO: valid states: {','.join(rs.VALID_STATES)}", err=True)
        return
    when = color or ("never" if os.environ.get("NO_COLOR") else "auto")
    if when not in ("always", "never", "auto"):
        fail(f"Invalid argument to --color: '{when}'")
    try:
        wanted = rs.state_list(states)
        if fmt == "help":
            click.echo(rs.format_help())
            return
        formatter = OutputFormat(rs.format_string(fmt), rs.HEADINGS)
    except rs.StatusError as exc:
        return fail(str(exc), exc.hint)
    except FormatError as exc:
        return fail(str(exc))
    if when == "never" or (when == "auto" and not sys.stdout.isatty()):
        formatter = formatter.without(["color_up", "color_off"])
    snap = rs.snapshot(_resource_status(nodeid=0), _queue_state())
    if include:
        try:
            snap = snap.restricted(rs.include_ranks(snap, include))
        except rs.StatusError as exc:
            return fail(str(exc))
    lines = rs.status_lines(snap, wanted, formatter, explicit_states=bool(states), skip_empty=skip_empty)
    for line in formatter.render(lines, no_header):
        print(line)  # not click.echo, which drops --color's escapes when stdout is no terminal


def _queue_state() -> QueueState | None:
    """Running jobs' ranks and drained ranks, or None where no job manager answers (nothing allocated)."""
    try:
        return _rpc(QUEUE_STATE, nodeid=0)
    except click.ClickException:
        return None


@resource.command("R")
def resource_r() -> None:
    """The instance's resource set in Flux's R format (JSON)."""
    click.echo(json.dumps(_rpc(RESOURCE_R)))


def _ranks(ranks: str) -> list[int]:
    from common import idset

    try:
        return sorted(idset.decode(ranks)) if ranks else []
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="RANKS") from None


@resource.command("drain")
@click.argument("ranks", required=False, default=None)
@click.argument("reason", nargs=-1)
@click.option("-f", "--force", is_flag=True, help="Drain ranks already drained too, replacing their reason.")
@click.option("-u", "--update", is_flag=True, help="Drain only the ranks not drained yet; keep the others' reason.")
@click.option(
    "--set",
    "exact",
    is_flag=True,
    help="RANKS become exactly the ranks drained with REASON: those drained with it and not in RANKS are "
    "undrained, ranks drained for another reason are left alone (how a controller keeps its own drains).",
)
def resource_drain(ranks: str | None, reason: tuple[str, ...], force: bool, update: bool, exact: bool) -> None:
    """Give no new jobs to RANKS (an idset, e.g. 2-3) because of REASON; jobs running there finish.

    Without RANKS, list the drained ranks: time, state (draining while a job still runs there), ranks, reason
    and nodes. A rank already drained is refused unless --force or --update. Prints the answer as JSON.
    """
    if ranks is None:
        if reason or force or update or exact:
            raise click.UsageError("RANKS is required to drain (without it, the drained ranks are listed)")
        state = _rpc(QUEUE_STATE)
        hostnames = list(_resource_status().get("hostnames", []))
        click.echo(f"{'TIMESTAMP':<20} {'STATE':<8} {'RANK':<8} {'REASON':<30} NODELIST")
        for stamp, word, ids, why, hosts in drain_rows(state, hostnames):
            click.echo(f"{stamp:<20} {word:<8} {ids:<8} {why:<30} {hosts}".rstrip())
        return
    if sum((force, update, exact)) > 1:
        raise click.UsageError("--force, --update and --set go alone")
    mode = "replace" if exact else "force" if force else "update" if update else "drain"
    wanted = _ranks(ranks)
    if not wanted and mode != "replace":
        raise click.BadParameter("no ranks given", param_hint="RANKS")
    answer = _rpc(DRAIN, {"ranks": wanted, "reason": " ".join(reason), "mode": mode})
    click.echo(json.dumps(answer))


@resource.command("undrain")
@click.argument("ranks")
def resource_undrain(ranks: str) -> None:
    """Let RANKS take new jobs again (each must be drained)."""
    wanted = _ranks(ranks)
    if not wanted:
        raise click.BadParameter("no ranks given", param_hint="RANKS")
    click.echo(json.dumps(_rpc(DRAIN, {"ranks": wanted, "mode": "undrain"})))


@resource.command("demand")
def resource_demand() -> None:
    """The queue in nodes, as JSON: pending jobs' node needs, running jobs' ranks, drained ranks and why."""
    click.echo(json.dumps(_rpc(QUEUE_STATE)))


# ------------------------------------------------------------------------------------------ overlay
@cli.group()
def overlay() -> None:
    """Show the tree-based overlay network."""


@overlay.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the raw status object.")
def overlay_status(as_json: bool) -> None:
    """Per-rank overlay state, drawn as the tree."""
    status = _overlay_status()
    if as_json:
        click.echo(json.dumps(status))
        return
    for line in render_overlay(status):
        click.echo(line)


@overlay.command("parentof")
@click.argument("rank", type=int)
def overlay_parentof(rank: int) -> None:
    """Print the parent rank of RANK."""
    status = _overlay_status()
    if not 0 < rank < status["size"]:
        raise click.ClickException(f"rank {rank} has no parent in an instance of size {status['size']}")
    click.echo(status["parents"][rank])


# ------------------------------------------------------------------------------------------ attributes
@cli.command("getattr")
@click.argument("name")
def getattr_(name: str) -> None:
    """Print the value of broker attribute NAME (size, rank, hostlist, local-uri, ...)."""
    click.echo(_rpc(ATTR_GET, {"name": name})["value"])


@cli.command("lsattr")
@click.option("-v", "--values", is_flag=True, help="Show values too.")
def lsattr(values: bool) -> None:
    """List broker attributes."""
    with _handle() as handle:
        for name in handle.rpc("attr.list")["names"]:
            click.echo(f"{name:<24} {handle.getattr(name)}" if values else name)


# ------------------------------------------------------------------------------------------ uptime / ping
def format_duration(seconds: float) -> str:
    """Flux's short durations: 45s, 2.3m, 1.2h, 3.1d."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


@cli.command()
def uptime() -> None:
    """Instance state, how long it has been up, and its size."""
    info = _rpc(UPTIME, nodeid=0)
    now = time.strftime("%H:%M:%S")
    click.echo(
        f" {now} {info['state']} {format_duration(info['uptime'])},  owner {getpass.getuser()},"
        f"  depth {info['depth']},  size {info['size']}"
    )


@cli.command()
@click.option(
    "-c", "--count", type=click.IntRange(min=1), default=None, help="Stop after this many pings (default: forever)."
)
@click.option("-i", "--interval", type=float, default=1.0, show_default=True, help="Seconds between pings.")
@click.option("-p", "--pad", type=int, default=0, help="Bytes of padding.")
@click.argument("target")
def ping(count: int | None, interval: float, pad: int, target: str) -> None:
    """Round-trip broker.ping to TARGET (a rank)."""
    try:
        rank = int(target)
    except ValueError:
        raise click.ClickException(f"invalid target {target!r}: expected a rank number") from None
    with _handle() as handle:
        click.echo(f"flux-ping {rank}!broker")  # flux-core's first line
        seq = 0
        while count is None or seq < count:
            start = time.perf_counter()
            try:
                reply = handle.rpc("broker.ping", {"pad": "x" * pad}, nodeid=rank, timeout=10.0)
            except FluxError as exc:
                raise click.ClickException(f"{rank}!broker.ping: {exc}") from None
            elapsed = (time.perf_counter() - start) * 1000
            route = "!".join(str(r) for r in reply["route"])
            click.echo(f"{rank}!broker.ping pad={pad} seq={seq} time={elapsed:.3f} ms ({route})")
            seq += 1
            if count is None or seq < count:
                time.sleep(interval)


@cli.command()
def version() -> None:
    """Which `flux` this is (flux-core prints its commands and libflux-core versions)."""
    import platform
    from importlib.metadata import version as package_version

    import zmq

    click.echo(f"commands:    \t\t{package_version('miniclusters')}")
    click.echo(f"broker:      \t\tminiclusters built-in (Python {platform.python_version()}, pyzmq {zmq.__version__})")


@cli.command()
def shutdown() -> None:
    """Shut the whole instance down."""
    _rpc(SHUTDOWN, nodeid=0)


# ------------------------------------------------------------------------------------------ events
@cli.group()
def event() -> None:
    """Publish or watch instance events."""


@event.command("pub")
@click.argument("topic")
@click.argument("payload", required=False, default="{}")
def event_pub(topic: str, payload: str) -> None:
    """Publish TOPIC with a JSON object PAYLOAD."""
    if too_deep(payload.encode("utf-8", "surrogateescape")):
        raise click.ClickException(f"payload: {depth_problem()}")
    try:
        body = json.loads(payload)
    except ValueError as exc:
        raise click.ClickException(f"payload is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise click.ClickException("payload must be a JSON object")
    _rpc(EVENT_PUBLISH, {"topic": topic, "payload": body})


@event.command("sub")
@click.option("-c", "--count", type=click.IntRange(min=1), default=None, help="Exit after this many events.")
@click.argument("topics", nargs=-1)
def event_sub(count: int | None, topics: tuple[str, ...]) -> None:
    """Print events matching TOPICS (prefixes; all events if none)."""
    with _handle() as handle:
        for topic in topics or ("",):
            handle.subscribe(topic)
        seen = 0
        while count is None or seen < count:
            msg = handle.recv_event(timeout=None)
            if msg is None:
                continue
            click.echo(f"{msg.topic}\t{json.dumps(msg.payload)}")
            sys.stdout.flush()
            seen += 1
