"""`python -m broker.subinstance PLAN`: one broker of a child instance, started as a task of a batch/alloc job.

See modules/subinstance.py for the plan. Rank 0 of the child binds a fresh port and publishes its endpoint and
local URI in the parent job's annotations (so `flux proxy JOBID` finds it); the others wait for it, then join.
The child ends when its initial program (the batch script, or the alloc command) ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys

from .attributes import Attributes
from .bootstrap import BootstrapError, BootstrapTable, HostTable, parse_bootstrap
from .broker import BrokerOptions, run_broker
from .client import FluxError, Handle
from .modules import default_modules
from .payloads import SubinstancePlan


def _free_port(address: str) -> int:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((address.strip("[]"), 0))
        return int(sock.getsockname()[1])


def _endpoint(plan: SubinstancePlan, parent: Handle, jobid: int) -> str:
    """Rank 0: pick and publish the endpoint; others: wait until rank 0 has published it."""
    rundir = plan["rundir"]
    if plan["index"] == 0:
        address = plan["hosts"][0][1]
        with contextlib.suppress(OSError):
            address = socket.gethostbyname(address) if not address.startswith("[") else address
        endpoint = f"tcp://{address}:{_free_port(address)}"
        note = {"subinstance": {"endpoint": endpoint, "uri": f"local://{rundir}/local", "host": plan["hosts"][0][0]}}
        parent.rpc("job-manager.annotate", {"id": jobid, "annotations": note}, timeout=30)
        return endpoint
    reply = parent.rpc("job-manager.annotation-wait", {"id": jobid, "key": "subinstance"}, timeout=120)
    info = reply["annotations"].get("subinstance")
    if not info:
        raise FluxError(2, f"job {jobid} ended before its sub-instance started")
    return str(info["endpoint"])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0], encoding="utf-8") as handle:
        plan: SubinstancePlan = json.load(handle)
    jobid = int(os.environ["FLUX_JOB_ID"])
    try:
        with Handle(os.environ["FLUX_URI"]) as parent:
            endpoint = _endpoint(plan, parent, jobid)
    except FluxError as exc:
        print(f"flux-subinstance: {exc}", file=sys.stderr)
        return 1
    hosts: list[HostTable] = [{"host": name} for name, _addr in plan["hosts"]]
    hosts[0].update({"bind": endpoint, "connect": endpoint})
    table: BootstrapTable = {"hosts": hosts}
    cert = plan.get("cert")
    if len(hosts) > 1 and cert:
        table["curve_cert"] = cert
    hostname = plan["hosts"][plan["index"]][0]
    try:
        config = parse_bootstrap({"bootstrap": table}, f"sub-instance of job {jobid}", hostname)
    except BootstrapError as exc:
        print(f"flux-subinstance: {exc}", file=sys.stderr)
        return 1
    attrs = Attributes(
        [
            *plan.get("attrs", {}).items(),
            ("rundir", plan["rundir"]),
            ("statedir", os.path.join(plan["rundir"], "state")),
            ("instance-level", str(plan["level"])),
            ("resource.cores", ",".join(str(c) for c in plan["cores"])),
            ("parent-uri", os.environ["FLUX_URI"]),
            ("jobid", str(jobid)),
        ]
    )
    options = BrokerOptions(
        config=config,
        attrs=attrs,
        hostname=hostname,
        command=plan["command"] if plan["index"] == 0 else [],
        modules=default_modules(),
    )
    return run_broker(options)


if __name__ == "__main__":
    sys.exit(main())
