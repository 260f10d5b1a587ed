"""One kind's list + watch for the operator: every object seen is handed on (the controller turns it into keys).

Kept apart from the controller: it knows the API and a callback, not the reconcile loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from miniclusters.backends.kubernetes.api import ApiError, Kind, KubeApi
from miniclusters.kube_shapes import KubeObject

log = logging.getLogger("miniclusters.operator")


class Watcher:
    """list + watch for one kind, feeding objects to ``enqueue``; relists on 410 Gone."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str | None,
        kind: Kind,
        label_selector: str | None,
        enqueue: Callable[[KubeObject], None],
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.kind = kind
        self.label_selector = label_selector
        self.enqueue = enqueue
        self.resource_version = ""
        self.failures = 0

    def sync(self) -> None:
        items, self.resource_version = self.api.list_objects(self.kind, self.namespace, self.label_selector)
        for item in items:
            self.enqueue(item)

    resync = sync

    def poll(self, timeout_seconds: int) -> None:
        if not self.resource_version:
            self.sync()
            return
        events = self.api.watch(self.kind, self.namespace, self.resource_version, timeout_seconds, self.label_selector)
        for event in events:
            if event.type == "ERROR":
                if event.object.get("code") == 410:
                    self.sync()  # our resourceVersion expired: list again
                    return
                raise ApiError(int(event.object.get("code") or 500), "WatchError", str(event.object.get("message")))
            version = event.object.get("metadata", {}).get("resourceVersion")
            if version:
                self.resource_version = version
            if event.type != "BOOKMARK":
                self.enqueue(event.object)

    def run(self, stop: threading.Event, timeout_seconds: int) -> None:
        while not stop.is_set():
            try:
                self.poll(timeout_seconds)
                self.failures = 0
            except Exception as exc:  # keep watching whatever happens; back off on repeated failures
                self.failures += 1
                delay = min(30.0, 0.5 * 2 ** min(self.failures, 6))
                log.warning("watch %s failed: %s; retrying in %.1fs", self.kind.plural, exc, delay)
                stop.wait(delay)
