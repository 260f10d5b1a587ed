"""The Events the operator records about a MiniCluster (events.k8s.io/v1), built from what happened: a pure
function, so the controller only sends them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, TypedDict

from miniclusters.backends.kubernetes.api import EVENT
from miniclusters.kube_shapes import KubeObject
from miniclusters.operator.reconcile import EventSpec

REPORTING_CONTROLLER = "miniclusters.dev/operator"


def rfc3339(moment: datetime, micro: bool = False) -> str:
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


class EventMeta(TypedDict):
    name: str
    namespace: str | None


class Regarding(TypedDict):
    """The MiniCluster an Event is about."""

    apiVersion: str
    kind: str
    name: str
    namespace: str | None
    uid: str | None
    resourceVersion: str | None


class EventBody(TypedDict):
    apiVersion: str
    kind: Literal["Event"]
    metadata: EventMeta
    eventTime: str
    reportingController: str
    reportingInstance: str
    action: str
    reason: str
    type: str
    note: str
    regarding: Regarding


def event_body(cluster: KubeObject, event: EventSpec, moment: datetime, serial: int, instance: str) -> EventBody:
    """The Event about ``cluster``; its name is unique per controller (the time in microseconds and a serial)."""
    meta = cluster["metadata"]
    return {
        "apiVersion": EVENT.api_version,
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{int(moment.timestamp() * 1e6):x}{serial:04x}",
            "namespace": meta.get("namespace"),
        },
        "eventTime": rfc3339(moment, micro=True),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": event.action,
        "reason": event.reason,
        "type": event.type,
        "note": event.note[:1024],
        "regarding": {
            "apiVersion": cluster["apiVersion"],
            "kind": cluster["kind"],
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
    }
