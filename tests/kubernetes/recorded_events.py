"""The Events the operator recorded, read back from the fake API server in their own shape."""

from __future__ import annotations

from typing import cast

from miniclusters.backends.kubernetes.api import EVENT
from miniclusters.operator.events import EventBody
from miniclusters.testing.fake_kube import FakeKube


def recorded_events(fake: FakeKube) -> list[EventBody]:
    """Every Event stored: the API layer returns them as KubeObject; they are the bodies the controller created
    (events.k8s.io/v1's own top-level fields), as the controller itself casts them on the way in."""
    return [cast(EventBody, event) for event in fake.all_of(EVENT)]
