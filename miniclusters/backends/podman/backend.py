"""The podman backend: the objects `minicluster render` emits, played as real OCI pods on this machine.

Each index of the rendered Indexed Job becomes one pod (`podman kube play` of its pod template, pods.py), on a
podman network of its own (`minicluster-<name>`), at a fixed address that every pod's /etc/hosts names with the
headless Service's DNS names. The init container copies the broker into the shared volume, the application
container runs the rendered entrypoint from the spec's image: nothing is templated twice.

The backend composes parts (core.py lists them): this class builds them once and hands each Backend and port
method to the part that does it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from elasticity.control.ports import ClusterView, PodResize, ScaleResult
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    EXEC_TIMEOUT,
    ClusterStatus,
    ClusterSummary,
    CreateOptions,
    ExecResult,
    InvalidRequestError,
    ResizeResult,
    RestEndpoint,
)
from miniclusters.backends.pod_flux import flux_bin
from miniclusters.backends.podman.actuate import PodmanActuator
from miniclusters.backends.podman.core import PodmanContext, in_pod, runner_container
from miniclusters.backends.podman.engine import Podman
from miniclusters.backends.podman.lifecycle import PodmanLifecycle
from miniclusters.backends.podman.observer import PodmanObserver
from miniclusters.backends.podman.play import PodPlayer
from miniclusters.backends.podman.pods import container_name, pod_address
from miniclusters.backends.podman.state import PodmanStore
from miniclusters.backends.reporting import Polling
from miniclusters.backends.wait import ProgressCallback

__all__ = ["BACKEND_NAME", "PodmanBackend", "flux_bin", "in_pod"]

BACKEND_NAME = "podman"


class PodmanBackend:
    """Backend over podman 4.3+ (`kube play`, `update --cpu-shares`), root, on this machine."""

    name = BACKEND_NAME
    ephemeral = True
    """The containers run on this machine: `up` follows the lead, then tears them down unless --keep (and on
    Ctrl-C), as the local backend does."""

    def __init__(
        self,
        progress: ProgressCallback | None = None,
        podman: Podman | None = None,
        store: PodmanStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_interval: float = 1.0,
        latency: str | None = None,
        context: str | None = None,
        namespace: str | None = None,
    ) -> None:
        if latency:
            raise InvalidRequestError(f"--latency applies to the local backend only (backend is {BACKEND_NAME!r})")
        if context:
            raise InvalidRequestError(f"--context applies to the kubernetes backend only (backend is {BACKEND_NAME!r})")
        polling = Polling(clock, sleep, poll_interval, progress)
        ctx = PodmanContext(podman or Podman(), store or PodmanStore(), namespace or "default", polling)
        player = PodPlayer(ctx)
        self._ctx = ctx
        self._observer = PodmanObserver(ctx, player)
        self._lifecycle = PodmanLifecycle(ctx, player, self._observer.status)
        self._actuator = PodmanActuator(ctx, player)

    @property
    def store(self) -> PodmanStore:
        """The state directory's podman clusters (the CLI and the tests read records from it)."""
        return self._ctx.store

    # ------------------------------------------------------------------ lifecycle
    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        return self._lifecycle.create(mc, options)

    def exists(self, mc: MiniCluster) -> bool:
        return self._lifecycle.exists(mc)

    def stored_spec(self, name: str) -> dict[str, Any] | None:  # open: the spec's own JSON (PodmanRecord.spec)
        return self._lifecycle.stored_spec(name)

    def delete(self, name: str) -> None:
        self._lifecycle.delete(name)

    # ------------------------------------------------------------------ observing
    def status(self, name: str) -> ClusterStatus:
        return self._observer.status(name)

    def observe(self, name: str) -> ClusterView:
        return self._observer.observe(name)

    def runner_identity(self, name: str) -> dict[int, object]:
        return self._observer.runner_identity(name)

    # ------------------------------------------------------------------ acting
    def scale(self, name: str, size: int) -> ClusterStatus:
        """Add pods for the new indexes or remove the highest ones; the lead (index 0) is never removed."""
        self._actuator.scale_to(name, size)
        return self._observer.status(name)

    def scale_to(self, name: str, size: int) -> ScaleResult:
        return self._actuator.scale_to(name, size)

    def resize(self, name: str, index: int, cpu: str) -> ResizeResult:
        return self._actuator.resize(name, index, cpu)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        return self._actuator.resize_many(name, requests)

    # ------------------------------------------------------------------ reaching a pod
    def rest_endpoint(self, mc: MiniCluster, status: ClusterStatus) -> RestEndpoint:
        """The lead pod's address on the cluster's network, reachable from this machine (the bridge)."""
        record, _ = self._ctx.load(mc.name)
        url = f"http://{pod_address(record.subnet, 0)}:{mc.spec.restful.port}"
        return RestEndpoint(url, f"the lead pod's address on podman network {record.network}")

    def exec(self, name: str, index: int, argv: list[str], timeout: float = EXEC_TIMEOUT) -> ExecResult:
        _, mc = self._ctx.load(name)
        self._ctx.require_index(name, mc, index)
        return self._ctx.run_in_pod(name, mc, index, argv, timeout=timeout)

    def logs(self, name: str, index: int = 0, follow: bool = False) -> Iterator[str]:
        _, mc = self._ctx.load(name)
        self._ctx.require_index(name, mc, index)
        container = container_name(name, index, runner_container(mc))
        argv = ["logs", *(["--follow"] if follow else []), container]
        yield from self._ctx.podman.lines(argv)

    def list(self) -> list[ClusterSummary]:  # last: in the class body, `list` names this method from here on
        return self._observer.list()
