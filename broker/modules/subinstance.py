"""Sub-instances for `flux batch` / `flux alloc`: the job's tasks are the brokers of a child instance.

A job whose command is `flux broker ...` (Flux's own spelling of a batch job) gets one task per allocated rank;
job-exec runs `python -m broker.subinstance PLAN` there. The plan names the allocated hosts (same hostnames,
addresses taken from the parent's connect URIs), this rank's cores (the child's whole resource set), the
parent's CURVE certificate and the initial program. The child's rank 0 binds a fresh port, publishes it in
the parent job's annotations (`subinstance`), and the other ranks wait for that annotation before joining.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING

from . import job_tree

if TYPE_CHECKING:
    from ..payloads import SubinstancePlan
    from ..port import ModulePort
from ..payloads import SubinstancePlan
from .exec_request import ExecRequest

_HOST_OF_URI = re.compile(r"^tcp://(\[[^\]]+\]|[^:/]+)")
SOCKET_PATH_MAX = 107
"""Linux's sun_path holds 108 bytes with the NUL: a child's `<rundir>/local` socket must fit."""
RUNDIR = "instance"
"""The child's run directory in the job's tmpdir, or a link there to a short one under $TMPDIR."""


def child_rundir(tmpdir: str) -> str:
    """Where the child broker runs. Each level nests in its parent's job tmpdir, so a batch two levels down
    would name a socket past the 107-byte limit: then the rundir is a fresh short directory (as flux-core's
    sub-instances use one under $TMPDIR), linked from the job's tmpdir so the job's clean-up finds it."""
    nested = os.path.join(tmpdir, RUNDIR)
    if len(os.fsencode(os.path.join(nested, "local"))) <= SOCKET_PATH_MAX:
        return nested
    if os.path.islink(nested):  # this rank's exec of the job was started before (a restarted broker)
        return os.readlink(nested)
    short = tempfile.mkdtemp(prefix="flux-sub-")
    os.symlink(short, nested)
    return short


def remove_child_rundir(tmpdir: str) -> None:
    """Remove the short run directories `child_rundir` made for this job's sub-instance and, depth first, for
    its own batch jobs: a batch cancelled two levels down kills the brokers that would have removed theirs."""
    link = os.path.join(tmpdir, RUNDIR)
    rundir = os.readlink(link) if os.path.islink(link) else link
    jobtmp = os.path.join(rundir, job_tree.JOB_TMP)
    with contextlib.suppress(OSError):
        for child in os.listdir(jobtmp):
            remove_child_rundir(os.path.join(jobtmp, child))
    if os.path.islink(link):
        shutil.rmtree(rundir, ignore_errors=True)


def uri_host(uri: str | None, fallback: str) -> str:
    """The host part of a tcp:// URI (the address a child broker on that rank can bind and be reached at)."""
    match = _HOST_OF_URI.match(uri or "")
    return match.group(1) if match else fallback


def launch_command(request: ExecRequest, tmpdir: str, broker: ModulePort) -> list[str]:
    """Write this rank's plan and the batch script into the job's tmpdir; return the launcher command."""
    ranks = list(request.ranks)
    config = broker.config
    hosts = [[config.hostnames[r], uri_host(config.connect_uri(r), config.hostnames[r])] for r in ranks]
    script = request.batch_script
    if script is not None:
        path = os.path.join(tmpdir, "script")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(script)
        os.chmod(path, 0o755)
    command = [word.replace("{{tmpdir}}", tmpdir) for word in request.command[2:]]
    plan: SubinstancePlan = {
        "index": ranks.index(broker.rank),
        "hosts": hosts,
        "cores": list(request.cores[broker.rank]),
        "cert": config.curve_cert,
        "command": command,
        "level": request.level + 1,
        "rundir": child_rundir(tmpdir),
        "attrs": {
            k: v
            for k, v in broker.attrs.items()
            if k in ("heartbeat.interval", "heartbeat.timeout", "sched.queue-policy", "job-exec.kill-timeout")
        },
    }
    path = os.path.join(tmpdir, "subinstance.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(plan, handle)
    return [sys.executable, "-m", "broker.subinstance", path]
