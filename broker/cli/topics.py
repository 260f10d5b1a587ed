"""The RPCs the client commands make (`flux resource`, `overlay`, `getattr`, `uptime`, `shutdown`, `event pub`):
each topic with the shape of its answer (broker/rest/topics.Topic), so commands.py casts an answer once, where it
enters (`_rpc`), and reads named keys after."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from broker.rest.topics import JOB_LIST, JobListRequest, Topic

if TYPE_CHECKING:
    from broker.modules.job_manager.queue_state import DrainReply
    from broker.payloads import AttrValue, Empty, OverlayStatus, QueueState, ResourceStatus, RSpec, UptimeReply

__all__ = ["JOB_LIST", "Request"]


class DrainRequest(TypedDict):
    """job-manager.drain: the ranks, why, and how (drain, force, update, replace, undrain)."""

    ranks: list[int]
    reason: NotRequired[str]
    mode: str


class AttrRequest(TypedDict):
    """attr.get: the attribute's name."""

    name: str


class EventPublish(TypedDict):
    """event.publish: the event's topic and its payload."""

    topic: str
    payload: dict[str, Any]  # open: `flux event pub`'s JSON object, whatever the user wrote


Request = JobListRequest | DrainRequest | AttrRequest | EventPublish
"""Every request the client commands send with a payload."""

RESOURCE_STATUS: Topic[ResourceStatus] = Topic("resource.status")
RESOURCE_R: Topic[RSpec] = Topic("resource.R")
OVERLAY_STATUS: Topic[OverlayStatus] = Topic("overlay.status")
QUEUE_STATE: Topic[QueueState] = Topic("job-manager.queue-state")
DRAIN: Topic[DrainReply] = Topic("job-manager.drain")
ATTR_GET: Topic[AttrValue] = Topic("attr.get")
UPTIME: Topic[UptimeReply] = Topic("broker.uptime")
SHUTDOWN: Topic[Empty] = Topic("broker.shutdown")
EVENT_PUBLISH: Topic[Empty] = Topic("event.publish")
