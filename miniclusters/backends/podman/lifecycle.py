"""The podman lifecycle: `up` (the cluster's network, its record, then every pod of the first `size` indexes at
once), whether a cluster exists, and `down` (every pod, container, volume and the network; then the record)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from broker.curve_cert import render_zcert
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    BackendError,
    ClusterStatus,
    CreateOptions,
    ExecResult,
    InvalidRequestError,
    NotFoundError,
)
from miniclusters.backends.overlay import Ranks
from miniclusters.backends.podman.core import PodmanContext, runner_container, with_view_image
from miniclusters.backends.podman.observe import cluster_names
from miniclusters.backends.podman.play import PodPlayer
from miniclusters.backends.podman.pods import network_name, pod_address
from miniclusters.backends.podman.ready import await_brokers, waits_inside
from miniclusters.backends.podman.ready_host import await_from_host
from miniclusters.backends.podman.state import PodmanRecord, pinned_spec
from miniclusters.render import with_flavour
from miniclusters.render.objects import certificate_for

log = logging.getLogger(__name__)


class PodmanLifecycle:
    """create, exists and delete: given the context, the pod player, and the status to wait on."""

    def __init__(
        self, ctx: PodmanContext, player: PodPlayer, status: Callable[[str, Ranks | None], ClusterStatus]
    ) -> None:
        self._ctx = ctx
        self._player = player
        self._status = status

    def exists(self, mc: MiniCluster) -> bool:
        return self._ctx.store.exists(mc.name) or mc.name in cluster_names(self._ctx.podman)

    def stored_spec(self, name: str) -> dict[str, Any] | None:  # open: the spec's own JSON (PodmanRecord.spec)
        """The spec a cluster of this name was created from (None when there is none)."""
        store = self._ctx.store
        return store.load(name).spec if store.exists(name) else None

    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        """Network, then every pod of the first `size` indexes at once; wait for pods and brokers."""
        options = options or CreateOptions()
        mc = with_view_image(with_flavour(mc, options.render.flavour), options.render.registry, options.render.tag)
        if self.exists(mc):
            raise InvalidRequestError(
                f"MiniCluster {mc.name!r} already exists on the podman backend; remove it with "
                f"`minicluster down {mc.name} --backend podman`"
            )
        registered = mc.spec.effective_max_size
        certificate = certificate_for(mc, options.render.certificate)
        network = network_name(mc.name)
        subnet = self._player.create_network(mc.name, network)
        record = PodmanRecord(
            name=mc.name,
            spec=pinned_spec(mc, mc.spec.size, registered),
            registry=options.render.registry,
            tag=options.render.tag,
            certificate=render_zcert(certificate),
            network=network,
            subnet=subnet,
        )
        try:
            pod_address(subnet, registered - 1)
            self._ctx.store.save(record)
            rendered = self._ctx.rendered(record, mc)
            lead_restarts = mc.spec.interactive
            self._player.play(record, rendered, range(mc.spec.size), runner_container(mc), lead_restarts)
        except ValueError as exc:
            self._teardown(mc.name)
            raise InvalidRequestError(f"spec.maxSize: {exc}") from None
        except BaseException:
            self._teardown(mc.name)
            raise
        if not options.wait:
            return self._status(mc.name, None)
        polling = self._ctx.polling
        started = polling.clock()
        said: list[Ranks | None] = [None]
        if waits_inside(mc):
            said[0] = self._await_brokers(mc, options.timeout)

        def read() -> ClusterStatus:  # what the lead said inside holds for the first read; later ones ask again
            ranks, said[0] = said[0], None
            return self._status(mc.name, ranks)

        left = max(1.0, options.timeout - (polling.clock() - started))
        return polling.wait_ready(read, left)

    def _await_brokers(self, mc: MiniCluster, timeout: float) -> Ranks | None:
        """Every broker joined, seen through the lead's socket from this machine (ready_host.py); from inside the
        lead (ready.py) when that fails, with one log line."""
        polling = self._ctx.polling
        try:
            rundir = self._player.run_dir(mc.name, 0)
            return await_from_host(rundir, mc.spec.size, timeout, polling.clock, polling.sleep)
        except BackendError as exc:
            log.warning("waiting for the brokers from this machine failed (%s); asking inside the lead instead", exc)

        def run_in_lead(argv: list[str], limit: float) -> ExecResult:
            return self._ctx.run_in_pod(mc.name, mc, 0, argv, limit)

        return await_brokers(run_in_lead, mc.spec.size, timeout)

    def delete(self, name: str) -> None:
        """Every pod, container, volume and the network of the cluster; then its record."""
        if not self._ctx.store.exists(name) and name not in cluster_names(self._ctx.podman):
            raise NotFoundError(f"MiniCluster {name!r} not found on the podman backend")
        self._teardown(name)

    def _teardown(self, name: str) -> None:
        ctx = self._ctx
        if ctx.store.exists(name):
            record, mc = ctx.load(name)
            rendered = ctx.rendered(record, mc)
            self._player.remove_pods(rendered, range(record.registered))
            self._player.remove_network(record.network)
        else:  # only podman knows it (a record lost): remove by label
            self._player.remove_labelled(name)
        ctx.store.remove(name)
