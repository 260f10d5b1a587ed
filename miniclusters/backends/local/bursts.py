"""A cluster's bursts on this machine: the burst service beside a lead, follower-only clusters (bursts) and their
hosts table, and a lead taking its bursts with it when deleted.

A burst is a MiniCluster with `spec.flux.bursting.leadBroker` (the Flux Operator's field for a burst): its pods
are all followers of a lead elsewhere, and its `hostlist` is the lead's registered hosts then its own pods.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from typing import Any

from broker.fsd import parse_fsd
from miniclusters.api.spec import DEFAULT_BROKER_PORT, MiniCluster
from miniclusters.backends.base import InvalidRequestError
from miniclusters.backends.local import process
from miniclusters.backends.local.core import LocalContext
from miniclusters.backends.local.state import ClusterRecord
from miniclusters.render.layout import CURVE_FILE

BURST_STATE = "bursts.json"
IDLE_ENV = "MINICLUSTERS_BURST_IDLE"
DEFAULT_IDLE = "30"


def burst_idle_period() -> str:
    """$MINICLUSTERS_BURST_IDLE, the burst service's --idle: a duration (`30`, `30s`, `2m`), checked at `up`
    before anything is created (a service refusing it later would leave burstable jobs waiting for ever)."""
    text = os.environ.get(IDLE_ENV, "").strip() or DEFAULT_IDLE
    try:
        parse_fsd(text)
    except ValueError as exc:
        raise InvalidRequestError(f"${IDLE_ENV}: {exc}") from None
    return text


class Bursts:
    """The bursts of local clusters (see the module docstring)."""

    def __init__(self, context: LocalContext) -> None:
        self._ctx = context

    def bursts_of(self, name: str) -> list[str]:
        """Local MiniClusters whose brokers follow `name`'s lead (spec.flux.bursting.leadBroker.name)."""
        found = []
        for other in self._ctx.store.names():
            with contextlib.suppress(OSError, ValueError, KeyError):
                lead = self._ctx.store.load_spec(other).get("spec", {}).get("flux", {}).get("bursting", {})
                if other != name and (lead.get("leadBroker") or {}).get("name") == name:
                    found.append(other)
        return found

    def lead_context(self, name: str) -> dict[str, Any]:  # open: the lead context as bursts read it
        """What the burst service and its plugins need about a cluster's lead (bursting.plugin.LeadContext),
        plus where its broker answers and where its bursts are recorded."""
        _record, mc = self._ctx.load(name)
        cluster_dir = self._ctx.store.cluster_dir(name)
        context = {
            "cluster": name,
            "spec": mc.to_dict(),
            "certificate": (cluster_dir / "curve" / CURVE_FILE).read_text(),
            "broker_port": DEFAULT_BROKER_PORT,
            "options": {"state_dir": str(self._ctx.store.root)},
        }
        return {
            "context": context,
            # the built-in broker's socket (the service runs for that flavour only), known before it exists
            "lead_uri": f"local://{self._ctx.store.pod_dir(name, 0) / 'run' / 'rundir' / 'local'}",
            "state_file": str(cluster_dir / BURST_STATE),
        }

    def start_burst_service(self, mc: MiniCluster, record: ClusterRecord) -> None:
        """spec.flux.bursting.plugins: the burst service runs beside the lead, on this machine's network."""
        cluster_dir = self._ctx.store.cluster_dir(mc.name)
        lead = self.lead_context(mc.name)
        context_file = cluster_dir / "burst-context.json"
        context_file.write_text(json.dumps(lead["context"]))
        context_file.chmod(0o600)
        argv = [
            sys.executable, "-m", "bursting.service", "--cluster", mc.name,
            "--uri", lead["lead_uri"], "--state", lead["state_file"], "--context", str(context_file),
            "--plugins", ",".join(p.name for p in mc.spec.flux.bursting.plugins),
            "--idle", burst_idle_period(),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "FLUX_URI"}
        env[process.TAG_VARIABLE] = f"{cluster_dir}#burst"
        with open(cluster_dir / "burst.log", "ab") as log:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                             cwd=record.cwd, start_new_session=True)  # fmt: skip
