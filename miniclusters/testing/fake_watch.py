"""The fake API server's event history: every write as a watch event, and watches that stream them as they come,
open until their timeout as a real watch is (DOCS_WATCH)."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from miniclusters.backends.kubernetes.api import Kind, WatchEvent
from miniclusters.kube_shapes import AnyObject, KubeObject, ObjectMeta
from miniclusters.testing.fake_merge import selector_matches


@dataclass(frozen=True)
class Recorded:
    version: int
    event: str
    key: str
    """The object's kind as the fake keys it (apiVersion/kind)."""
    obj: KubeObject
    """A copy of the object as stored."""


@dataclass
class EventLog:
    """Watch events by resourceVersion; a compacted log answers older versions 410 Gone."""

    history: list[Recorded] = field(default_factory=list)
    compacted: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)
    """Notified on every write: an open watch waits on it, as a real watch stream waits for the next event."""

    def add(self, version: int, event: str, key: str, obj: AnyObject) -> None:
        stored = cast(KubeObject, copy.deepcopy(obj))  # a pod or Job the controllers wrote, as the API serves it
        self.history.append(Recorded(version, event, key, stored))
        with self.changed:
            self.changed.notify_all()

    def watch(
        self, kind: Kind, key: str, namespace: str | None, since: int, timeout: int, selector: str | None
    ) -> Iterator[WatchEvent]:
        """Events of `kind` (keyed `key`) after `since` as they happen, until `timeout` seconds pass (0: only
        those already recorded). One that returned at once would make a watching thread spin, taking the
        interpreter from every other thread."""
        if since < self.compacted:
            # An expired resourceVersion answers 410 Gone; the client must list again (DOCS_WATCH).
            yield WatchEvent("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})
            return
        deadline = time.monotonic() + max(0, timeout)
        while True:
            for recorded in list(self.history):
                if recorded.version <= since:
                    continue
                since = recorded.version
                if recorded.key == key and _wanted(recorded.obj["metadata"], kind, namespace, selector):
                    yield WatchEvent(recorded.event, copy.deepcopy(recorded.obj))
            with self.changed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                if not self.history or self.history[-1].version <= since:
                    self.changed.wait(left)


def _wanted(meta: ObjectMeta, kind: Kind, namespace: str | None, selector: str | None) -> bool:
    if namespace and kind.namespaced and meta.get("namespace") != namespace:
        return False
    return selector_matches(meta.get("labels", {}), selector)
