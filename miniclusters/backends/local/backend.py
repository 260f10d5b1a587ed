"""The local backend: a MiniCluster on this machine from the same spec, rendered config and certificate.

Each pod is a supervised process tree running the rendered entrypoint with JOB_COMPLETION_INDEX, as in an
Indexed Job (see pods.py for namespaces, cgroups and nice levels). The backend composes parts, each owning its
own state (core.py lists them); this class builds them once and hands each Backend and port method to the part
that does it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from elasticity.control.ports import ClusterView, PodResize, ScaleResult
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    EXEC_TIMEOUT,
    BackendError,
    ClusterStatus,
    ClusterSummary,
    CreateOptions,
    ExecResult,
    InvalidRequestError,
    ResizeResult,
    RestEndpoint,
)
from miniclusters.backends.local import latency as delays
from miniclusters.backends.local import netns
from miniclusters.backends.local.actuate import Actuator
from miniclusters.backends.local.bursts import Bursts
from miniclusters.backends.local.core import (
    BACKEND_NAME,
    UNPRIVILEGED_ENV,
    WEIGHT_FORMULA_ENV,
    LocalContext,
    LocalSettings,
    notify_stderr,
)
from miniclusters.backends.local.lifecycle import Lifecycle
from miniclusters.backends.local.observe import Observer
from miniclusters.backends.local.pods import Pods
from miniclusters.backends.local.prepare import Preparer
from miniclusters.backends.local.state import StateStore
from miniclusters.backends.wait import ProgressCallback


class LocalBackend:
    """Backend running every pod on this machine (see the module docstring)."""

    name = BACKEND_NAME
    ephemeral = True

    def __init__(
        self,
        namespace: str | None = None,
        progress: ProgressCallback | None = None,
        latency: str | None = None,
        unprivileged: bool | None = None,
        state_dir: Path | str | None = None,
        weight_formula: str | None = None,
        notify: Callable[[str], None] = notify_stderr,
        poll_interval: float = 0.3,
        context: str | None = None,
    ) -> None:
        if context:
            raise BackendError(f"--context applies to the kubernetes backend only (backend is {BACKEND_NAME!r})")
        if namespace:
            raise InvalidRequestError(
                f"--namespace {namespace!r}: the local backend has no namespaces (cluster names are per machine); "
                "drop --namespace or use --backend kubernetes"
            )
        if latency is not None:
            try:
                delays.microseconds(latency)
            except ValueError as exc:
                raise InvalidRequestError(f"--latency {latency!r}: {exc}") from None
        formula = weight_formula or os.environ.get(WEIGHT_FORMULA_ENV) or "nonlinear"
        if formula not in ("linear", "nonlinear"):
            raise InvalidRequestError(f"${WEIGHT_FORMULA_ENV}={formula!r}: expected linear or nonlinear")
        forced = unprivileged if unprivileged is not None else os.environ.get(UNPRIVILEGED_ENV, "") not in ("", "0")
        settings = LocalSettings(
            privileged=os.geteuid() == 0 and not forced and netns.available(),
            latency=latency,
            weight_formula=formula,
            poll_interval=poll_interval,
            progress=progress,
            notify=notify,
        )
        ctx = LocalContext(StateStore(Path(state_dir) if state_dir else None), settings)
        observer = Observer(ctx)
        pods = Pods(ctx)
        bursts = Bursts(ctx)
        self._ctx = ctx
        self._observer = observer
        self._bursts = bursts
        self._lifecycle = Lifecycle(ctx, Preparer(ctx), pods, bursts, observer)
        self._actuator = Actuator(ctx, pods, observer)

    @property
    def store(self) -> StateStore:
        """The state directory's clusters (the CLI and the multiplexing session read specs and pod dirs from it)."""
        return self._ctx.store

    # ------------------------------------------------------------------ lifecycle
    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        return self._lifecycle.create(mc, options)

    def exists(self, mc: MiniCluster) -> bool:
        return self._lifecycle.exists(mc)

    def delete(self, name: str) -> None:
        self._lifecycle.delete(name)

    def finish_teardown(self, name: str) -> bool:
        return self._lifecycle.finish_teardown(name)

    # open: the spec as stored JSON; the lead context as bursts read it
    def stored_spec(self, name: str) -> dict[str, Any] | None:
        return self._lifecycle.stored_spec(name)

    # ------------------------------------------------------------------ observing
    def status(self, name: str) -> ClusterStatus:
        return self._observer.status(name)

    def observe(self, name: str) -> ClusterView:
        return self._observer.observe(name)

    def logs(self, name: str, index: int = 0, follow: bool = False) -> Iterator[str]:
        return self._observer.logs(name, index, follow)

    def kernel_weight(self, name: str, index: int) -> tuple[str, int | None]:
        return self._observer.kernel_weight(name, index)

    # ------------------------------------------------------------------ acting
    def scale(self, name: str, size: int) -> ClusterStatus:
        """Start the missing indexes, or stop the highest ones; the lead (index 0) is never removed."""
        self._actuator.scale_to(name, size)
        return self._observer.status(name)

    def scale_to(self, name: str, size: int) -> ScaleResult:
        return self._actuator.scale_to(name, size)

    def resize(self, name: str, index: int, cpu: str) -> ResizeResult:
        return self._actuator.resize(name, index, cpu)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        return self._actuator.resize_many(name, requests)

    # ------------------------------------------------------------------ bursts
    # open: the spec as stored JSON; the lead context as bursts read it
    def lead_context(self, name: str) -> dict[str, Any]:
        return self._bursts.lead_context(name)

    # ------------------------------------------------------------------ reaching a pod
    def lead_uri(self, name: str) -> str | None:
        return self._ctx.lead_uri(name)

    def rest_endpoint(self, mc: MiniCluster, status: ClusterStatus) -> RestEndpoint:
        """The lead pod's own address (netns mode) or its loopback address, at spec.restful.port."""
        lead = status.pod(0)
        address = lead.node.split()[0] if lead is not None and lead.node else "127.0.0.1"
        return RestEndpoint(f"http://{address}:{mc.spec.restful.port}", f"see: minicluster logs {mc.name}")

    def expose_lead(self, name: str, port: int) -> tuple[str, int]:
        """Where brokers on another local network reach this cluster's lead broker: the lead pod's address,
        routed by this machine between the clusters' bridges (IP forwarding on, as a node's CNI keeps it)."""
        record, _ = self._ctx.load(name)
        lead = self._ctx.require_pod(record, 0)
        if record.mode == "netns":
            try:
                netns.enable_forwarding()
            except OSError as exc:
                raise BackendError(f"exposing the lead of {name!r}: cannot enable IP forwarding: {exc}") from None
        return lead.address, port

    def exec(self, name: str, index: int, argv: list[str], timeout: float = EXEC_TIMEOUT) -> ExecResult:
        record, _ = self._ctx.load(name)
        self._ctx.require_pod(record, index)
        try:
            return self._ctx.run(record, index, argv, timeout)
        except subprocess.TimeoutExpired:
            msg = f"`{' '.join(argv)}` in pod index {index} did not finish within {timeout:.0f}s"
            raise BackendError(msg) from None

    def list(self) -> list[ClusterSummary]:  # last: in the class body, `list` names this method from here on
        return self._observer.list()
