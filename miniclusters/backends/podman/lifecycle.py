"""The podman lifecycle: `up` (the cluster's network, its record, then every pod of the first `size` indexes at
once), whether a cluster exists, and `down` (every pod, container, volume and the network; then the record).

`up` asks podman as little and as concurrently as it can (each podman command is 0.05-0.09 s of a 2-core
machine's CPU): the network beside the bundle's volumes, the network's subnet from its file (netconf.py), the
pods' containers inspected while the brokers are awaited in the lead's volume, and that inspect is the first
status read's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
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
from miniclusters.backends.podman.observe import PodmanPod, cluster_names, mount_source
from miniclusters.backends.podman.play import PodPlayer
from miniclusters.backends.podman.pods import network_name, owned_name, pod_address
from miniclusters.backends.podman.ready import await_brokers, waits_inside
from miniclusters.backends.podman.ready_host import await_from_host
from miniclusters.backends.podman.state import PodmanRecord, pinned_spec
from miniclusters.render import with_flavour
from miniclusters.render.layout import RUN_DIR, VOLUME_RUN
from miniclusters.render.objects import certificate_for

log = logging.getLogger(__name__)

StatusRead = Callable[[str, Ranks | None, list[PodmanPod] | None], ClusterStatus]
"""The observer's status: a cluster's name, what its lead just said, its pods as just read (None: ask)."""


class PodmanLifecycle:
    """create, exists and delete: given the context, the pod player, and the status to wait on."""

    def __init__(self, ctx: PodmanContext, player: PodPlayer, status: StatusRead) -> None:
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
        """The network and the bundle's volumes at once (whether the name is taken asked only when its network
        was there already); then every pod of the first `size` indexes at once; wait for the brokers while their
        containers are inspected."""
        options = options or CreateOptions()
        mc = with_view_image(with_flavour(mc, options.render.flavour), options.render.registry, options.render.tag)
        if self._ctx.store.exists(mc.name):
            raise _taken(mc.name)
        registered = mc.spec.effective_max_size
        certificate = certificate_for(mc, options.render.certificate)
        network = network_name(mc.name)
        record = PodmanRecord(
            name=mc.name,
            spec=pinned_spec(mc, mc.spec.size, registered),
            registry=options.render.registry,
            tag=options.render.tag,
            certificate=render_zcert(certificate),
            network=network,
            subnet="",
        )
        rendered = self._ctx.rendered(record, mc)
        indexes = range(mc.spec.size)
        with ThreadPoolExecutor(max_workers=1) as pool:  # the bundle's volumes looked up beside the network
            bundle = pool.submit(self._player.bundle, rendered, indexes)
            record = replace(record, subnet=self._network_unless_taken(mc.name, network))
        try:
            pod_address(record.subnet, registered - 1)
            self._ctx.store.save(record)
            lead_restarts = mc.spec.interactive
            volumes = bundle.result()
            self._player.play(record, rendered, indexes, runner_container(mc), lead_restarts, volumes)
        except ValueError as exc:
            self._teardown(mc.name)
            raise InvalidRequestError(f"spec.maxSize: {exc}") from None
        except BaseException:
            self._teardown(mc.name)
            raise
        return self._started(mc, options, volumes.home)

    def _network_unless_taken(self, name: str, network: str) -> str:
        """The cluster's network made (its subnet); when it was there already (a cluster's pods are always on
        their network: podman removes no network in use), whether podman has pods of a cluster of that name,
        and then the `up` is refused (its network left as it was)."""
        try:
            subnet, made = self._player.create_network(name, network)
        except BackendError:
            if name in cluster_names(self._ctx.podman):
                raise _taken(name) from None
            raise
        if not made and name in cluster_names(self._ctx.podman):
            raise _taken(name)
        return subnet

    def _started(self, mc: MiniCluster, options: CreateOptions, volumes_home: str | None) -> ClusterStatus:
        """The status once the brokers joined (or at once without --wait). The pods' containers are inspected
        while the brokers are awaited (the lead's run directory is its volume's, where podman keeps volumes, when
        that is known and there: else the inspect's mount says), and that inspect is the first status read's
        when the brokers were seen joining."""
        indexes = range(mc.spec.size)
        if not options.wait:
            return self._status(mc.name, None, self._ctx.started_pods(mc.name, mc, indexes))
        polling = self._ctx.polling
        started = polling.clock()
        said: list[Ranks | None] = [None]
        with ThreadPoolExecutor(max_workers=1) as pool:
            inspecting = pool.submit(self._ctx.started_pods, mc.name, mc, indexes)
            if waits_inside(mc):
                volume = Path(volumes_home or "/nonexistent") / owned_name(mc.name, 0, VOLUME_RUN) / "_data"
                known = volume / "rundir" if volumes_home and volume.is_dir() else None
                said[0] = self._await_brokers(mc, options.timeout, lambda: known or self._run_dir(mc.name, inspecting))
            pods = inspecting.result()
        inspected: list[list[PodmanPod] | None] = [pods if said[0] is not None or not waits_inside(mc) else None]

        def read() -> ClusterStatus:  # what the lead said inside holds for the first read; later ones ask again
            ranks, said[0] = said[0], None
            read_pods, inspected[0] = inspected[0], None
            return self._status(mc.name, ranks, read_pods)

        left = max(1.0, options.timeout - (polling.clock() - started))
        return polling.wait_ready(read, left)

    def _run_dir(self, name: str, inspecting: Future[list[PodmanPod]]) -> Path:
        """The lead's run directory as its container's mounts show it, or as its volume's inspect does."""
        lead = next((p.container for p in inspecting.result() if p.index == 0), None)
        source = mount_source(lead, RUN_DIR)
        return Path(source) / "rundir" if source else self._player.run_dir(name, 0)

    def _await_brokers(self, mc: MiniCluster, timeout: float, rundir: Callable[[], Path] | None = None) -> Ranks | None:
        """Every broker joined, seen through the lead's socket from this machine (ready_host.py; `rundir` says
        where the lead's run directory is, else its volume is inspected); from inside the lead (ready.py) when
        that fails, with one log line."""
        polling = self._ctx.polling
        try:
            where = rundir() if rundir is not None else self._player.run_dir(mc.name, 0)
            return await_from_host(where, mc.spec.size, timeout, polling.clock, polling.sleep)
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


def _taken(name: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"MiniCluster {name!r} already exists on the podman backend; remove it with "
        f"`minicluster down {name} --backend podman`"
    )
