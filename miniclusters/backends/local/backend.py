"""The local backend: a MiniCluster on this machine from the same spec, rendered config and certificate.

Each pod is a supervised process tree running the rendered entrypoint with JOB_COMPLETION_INDEX, as in an
Indexed Job (see lifecycle.py for namespaces, cgroups and nice levels). Split by concern: core.py (settings,
state, reaching into a pod), lifecycle.py (create, pods, delete), observe.py (status, the ClusterView),
actuate.py (scale and resize: the actuator).
"""

from __future__ import annotations

import subprocess

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import BackendError, ClusterStatus, ExecResult, RestEndpoint
from miniclusters.backends.local import netns
from miniclusters.backends.local.actuate import Actuating


class LocalBackend(Actuating):
    """Backend running every pod on this machine (see the module docstring)."""

    def rest_endpoint(self, mc: MiniCluster, status: ClusterStatus) -> RestEndpoint:
        """The lead pod's own address (netns mode) or its loopback address, at spec.restful.port."""
        lead = status.pod(0)
        address = lead.node.split()[0] if lead is not None and lead.node else "127.0.0.1"
        return RestEndpoint(f"http://{address}:{mc.spec.restful.port}", f"see: minicluster logs {mc.name}")

    def expose_lead(self, name: str, port: int) -> tuple[str, int]:
        """Where brokers on another local network reach this cluster's lead broker: the lead pod's address,
        routed by this machine between the clusters' bridges (IP forwarding on, as a node's CNI keeps it)."""
        record, _ = self._load(name)
        lead = self._require_pod(record, 0)
        if record.mode == "netns":
            try:
                netns.enable_forwarding()
            except OSError as exc:
                raise BackendError(f"exposing the lead of {name!r}: cannot enable IP forwarding: {exc}") from None
        return lead.address, port

    def exec(self, name: str, index: int, argv: list[str]) -> ExecResult:
        record, _ = self._load(name)
        self._require_pod(record, index)
        try:
            return self._run(record, index, argv, 3600.0)
        except subprocess.TimeoutExpired:
            raise BackendError(f"`{' '.join(argv)}` in pod index {index} did not finish within an hour") from None
