"""`flux queue` (start/stop/enable/disable/policy/status/idle, and our `save ARCHIVE`) and `flux proxy` (a shell
inside a job's instance)."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from .jobcli_common import CommandError, _client, _flux_error, _jobid
from .options import Opt, OptionError, parse

if TYPE_CHECKING:
    from .option_values import OptionValues

# ------------------------------------------------------------------------------------------ queue
QUEUE_OPTS = [
    Opt(("-v", "--verbose"), "verbose", "flag", help="also the policy and job counts"),
    Opt(("-m", "--message"), "message", help="reason shown while stopped or disabled"),
    Opt(("-t", "--timeout"), "timeout", help="idle/drain: give up after this long (FSD)"),
    Opt(("-q", "--quiet"), "quiet", "flag", help="print nothing"),
    Opt(("-a", "--all"), "all", "flag", help="all queues"),
    Opt(("--cluster",), "cluster", help="save: the MiniCluster's name, recorded as the archive's source"),
    Opt(("--force",), "force", "flag", help="save: replace an existing archive"),
]


def cmd_queue(argv: list[str]) -> int:
    values, args = parse(argv, QUEUE_OPTS, interleave=True)
    if not args:
        raise OptionError(
            "usage: flux queue status|start|stop|enable|disable|idle|drain|policy [fcfs|easy]|save ARCHIVE"
        )
    action = args[0]
    with _client() as client:
        if action in ("idle", "drain"):
            timeout = _timeout(values, None)
            try:
                client.queue_idle(action, timeout=timeout)
            except _flux_error() as exc:
                raise CommandError(f"{action}: {exc}") from None
            return 0
        if action == "save":
            return _queue_save(client, args[1:], values)
        if action == "policy":
            status = client.queue("policy", args[1]) if len(args) > 1 else client.queue("status")
            print(status["policy"])
            return 0
        if action not in ("status", "start", "stop", "enable", "disable"):
            raise OptionError(f"flux queue {action}: not supported")
        if len(args) > 1:
            raise OptionError(
                f"flux queue {action}: no queue named {args[1]!r}: this instance has one anonymous queue "
                "(a reason goes in -m MESSAGE)"
            )
        status = client.queue(action, values.get("message", ""))
    if action in ("status", "start", "stop") and not values.get("quiet"):
        enabled = "enabled" if status["enabled"] else f"disabled: {status['enable_reason']}"
        started = (
            "started" if status["started"] else "stopped" + (f": {status['stop_reason']}" * bool(status["stop_reason"]))
        )
        print(f"Job submission is {enabled}")
        print(f"Scheduling is {started}")
        if values.get("verbose"):
            print(f"Policy {status['policy']}, {status['pending']} pending, {status['running']} running")
    return 0


def _timeout(values: OptionValues, default: float | None) -> float | None:
    from ..fsd import parse_fsd

    if not values.get("timeout"):
        return default
    try:
        return parse_fsd(values["timeout"])
    except ValueError as exc:
        raise OptionError(f"--timeout: {exc}") from None


def _queue_save(client: Any, args: list[str], values: OptionValues) -> int:
    """`flux queue save ARCHIVE`: not in Flux (whose `flux dump` saves the content store); ours writes the queue
    archive that `minicluster up --restore` reads."""
    if len(args) != 1:
        raise OptionError("usage: flux queue save [--timeout=FSD] [--cluster=NAME] [--force] ARCHIVE")
    timeout = _timeout(values, 600.0)
    try:
        path = os.path.abspath(args[0])
        saved = client.queue_save(path, values.get("cluster") or "", timeout, bool(values.get("force")))
    except _flux_error() as exc:
        raise CommandError(f"save: {exc}") from None
    if not values.get("quiet"):
        print(json.dumps(saved))
    return 0


# ------------------------------------------------------------------------------------------ proxy
def _check_reachable(uri: str) -> None:
    """As flux-core's proxy, which connects first: a URI that names no instance is refused, not handed on."""
    from .lean import connect

    if not uri.startswith(("local://", "ipc://", "tcp://")):
        raise CommandError(f"{uri}: unsupported URI scheme (expected local://, ipc:// or tcp://)")
    try:
        with connect(uri) as handle:
            handle.rpc("broker.info", {}, 0, 10.0)
    except _flux_error() as exc:
        raise CommandError(f"cannot reach an instance at {uri}: {exc}") from None


def cmd_proxy(argv: list[str]) -> int:
    if not argv:
        raise OptionError("usage: flux proxy JOBID|URI [COMMAND...]")
    target, command = argv[0], argv[1:] or [os.environ.get("SHELL", "/bin/sh")]
    if "://" in target:
        uri = target
        _check_reachable(uri)
    else:
        jobid = _jobid(target)
        with _client() as client:
            info = client.info(jobid)
            sub = info.annotations.get("subinstance")
            if not sub:
                if info.state in ("RUN", "SCHED", "PRIORITY", "DEPEND"):
                    reply = client.handle.rpc(
                        "job-manager.annotation-wait", {"id": jobid, "key": "subinstance"}, -1, 60.0
                    )
                    sub = reply["annotations"].get("subinstance")
                if not sub:
                    raise CommandError(f"{info.f58}: job is not a Flux instance (or has ended)")
            uri = str(sub["uri"])
        deadline = time.monotonic() + 30.0  # the child's rank 0 publishes its URI just before it binds
        while not os.path.exists(uri.removeprefix("local://")) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not os.path.exists(uri.removeprefix("local://")):
            raise CommandError(f"{target}: cannot reach the sub-instance at {uri} from {os.uname().nodename}")
    env = dict(os.environ, FLUX_URI=uri)
    bindir = os.path.dirname(sys.executable)  # so `flux proxy ID flux ...` finds this flux
    env["PATH"] = os.pathsep.join(filter(None, [env.get("PATH", ""), bindir]))
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise CommandError(f"{command[0]}: {exc.strerror}") from None
    return 127
