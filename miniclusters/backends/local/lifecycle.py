"""Creating a local MiniCluster, tearing it down and deleting it (a teardown cut short is finished by the next).

The steps are parts of their own: prepare.py checks the spec and writes the files, pods.py starts and stops each
pod, bursts.py starts the burst service and finds a lead's bursts, observe.py says when the cluster is ready.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import ClusterStatus, CreateOptions, NotFoundError
from miniclusters.backends.local import netns, process, slots
from miniclusters.backends.local.bursts import Bursts
from miniclusters.backends.local.core import LocalContext
from miniclusters.backends.local.observe import Observer
from miniclusters.backends.local.pods import Pods
from miniclusters.backends.local.prepare import Preparer
from miniclusters.backends.local.state import ClusterRecord
from miniclusters.backends.wait import wait_until_ready
from miniclusters.render import with_flavour
from miniclusters.render.placement import shape_for_placement


class Lifecycle:
    """create, teardown and delete, composed of the parts that do each step."""

    def __init__(
        self, context: LocalContext, preparer: Preparer, pods: Pods, bursts: Bursts, observer: Observer
    ) -> None:
        self._ctx = context
        self._preparer = preparer
        self._pods = pods
        self._bursts = bursts
        self._observer = observer

    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        """Write the rendered config, start pods 0..size-1, wait until every broker has joined the lead."""
        options = options or CreateOptions()
        mc = shape_for_placement(with_flavour(mc, options.render.flavour))  # spec.placement: workers, requests
        self._preparer.check_supported(mc)
        with self._ctx.store.lock():
            self._finish_teardown(mc.name)
            existed = self._ctx.store.exists(mc.name)
            try:
                record = self._preparer.prepare(mc, options)
            except BaseException:
                if not existed:  # nothing was started: drop the slot claim and any files written so far
                    slots.release(self._ctx.store.cluster_dir(mc.name))
                    self._ctx.store.remove(mc.name)
                raise
            try:
                for index in range(mc.spec.size):
                    self._pods.start(record, index)
                    self._ctx.store.save(record)
                if mc.spec.flux.bursting.plugins and mc.spec.flux.flavour == "builtin":  # flux: static hosts only
                    self._bursts.start_burst_service(mc, record)
            except BaseException:
                self.teardown(record)
                raise
        if not options.wait:
            return self._observer.status(mc.name)
        try:
            return wait_until_ready(
                lambda: self._observer.status(mc.name),
                timeout=options.timeout,
                clock=time.monotonic,
                sleep=time.sleep,
                interval=self._ctx.settings.poll_interval,
                progress=self._ctx.settings.progress,
            )
        except (KeyboardInterrupt, SystemExit):
            with self._ctx.store.lock():
                self.teardown(record)
            raise

    def teardown(self, record: ClusterRecord) -> None:
        """Stop every pod (all at once: SIGTERM everything, then wait), remove cgroups, namespaces, bridge, state.

        Marked deleting on disk before anything is removed, and every step may run again: a teardown cut short
        is finished by the next one (`_finish_teardown`)."""
        cluster_dir = self._ctx.store.cluster_dir(record.name)
        if not record.deleting and self._ctx.store.exists(record.name):
            record.deleting = True
            self._ctx.store.save(record)
        for pod in record.pods.values():
            if pod.pid is not None and process.alive(pod.pid, pod.start_ticks):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pod.pid, signal.SIGTERM)
        process.stop(None, None, f"{cluster_dir}#", grace=3.0, prefix=True)
        for index in sorted(set(record.pods) | set(range(record.max_size)), reverse=True):
            self._pods.stop(record, index, grace=0.5)
        driver = self._ctx.driver(record)
        if driver is not None:
            driver.remove_cluster(record.name)
        pinned = self._ctx.cpuset_driver(record)
        if pinned is not None:
            pinned.remove_cluster(record.name)
        if record.mode == "netns" and self._pods.owns_slot(record):
            netns.delete_bridge(record.slot)
        slots.release(self._ctx.store.cluster_dir(record.name))
        self._ctx.store.remove(record.name)

    def exists(self, mc: MiniCluster) -> bool:
        return self._ctx.store.exists(mc.name)

    def _finish_teardown(self, name: str) -> bool:
        """Finish removing a cluster whose teardown was cut short (the store is locked); True when one was."""
        if self._ctx.store.remains(name):
            self._ctx.store.remove(name)
            return True
        if not self._ctx.store.exists(name):
            return False
        try:
            record = self._ctx.store.load(name)
        except (OSError, ValueError):
            return False
        if not record.deleting:
            return False
        self._ctx.notify(f"finishing the teardown of MiniCluster {name} that was cut short")
        self.teardown(record)
        return True

    def finish_teardown(self, name: str) -> bool:
        """`_finish_teardown` under the store's lock (`up` calls it after Ctrl-C cut its own teardown short)."""
        with self._ctx.store.lock():
            return self._finish_teardown(name)

    def stored_spec(self, name: str) -> dict[str, Any] | None:  # open: the spec as stored JSON
        """The spec a cluster on this machine was created from (None when there is no such cluster, or only what a
        teardown cut short left of one)."""
        if not self._ctx.store.exists(name):
            return None
        with contextlib.suppress(OSError, ValueError):
            if self._ctx.store.load(name).deleting:
                return None
        try:
            return self._ctx.store.load_spec(name)
        except (OSError, ValueError):
            return {}

    def delete(self, name: str) -> None:
        with self._ctx.store.lock():
            if self._ctx.store.remains(name):  # a removal cut short after the cluster was gone: finish it quietly
                self._ctx.store.remove(name)
                return
            if not self._ctx.store.exists(name):
                raise NotFoundError(f"MiniCluster {name!r} not found on this machine (state {self._ctx.store.root})")
            for follower in self._bursts.bursts_of(name):  # a lead takes its bursts with it
                self.teardown(self._ctx.store.load(follower))
            self.teardown(self._ctx.store.load(name))
