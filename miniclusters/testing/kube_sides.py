"""One test, two API servers: the same test body runs against the in-memory fake (fake_kube.py) and against a real
cluster (tests/kubernetes/conftest.py's `kube` fixture, the `real_kube` marker), so that every rule the fake
enforces is one the real server enforces (docs/kubernetes.md, "Fake and real, test by test").

The fake runs its controllers synchronously after every write; the real Job controller, kubelet and garbage
collector act after the write returns. What a test expects to follow a write it therefore reads through
`eventually` (and the helpers built on it): on the fake the first look must already see it, on the real cluster it
is polled for, bounded.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from elasticity.model.resources import cpu_millicores
from miniclusters.api import load_minicluster
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.kubernetes.api import NODE, POD, ApiError, Kind, KubeApi
from miniclusters.kube_shapes import KubeObject, Pod
from miniclusters.render.layout import INDEX_LABEL
from miniclusters.testing.fake_kube import FakeKube
from miniclusters.testing.kube_e2e import wait_until

T = TypeVar("T")

APP_IMAGE = "ghcr.io/miniclusters/openmpi-openfoam:0.1.0"
"""An image the real node has (imagePullPolicy IfNotPresent; it pulls nothing): pods that must run use it."""
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
"""The smallest image the real node has, for a bare pod that only has to exist and run."""
SMALL_CPU = "50m"
"""What each pod of these tests requests: the real node has 2 CPUs, shared with whatever else runs there."""
REAL_TIMEOUT = 240.0
"""How long the real cluster may take to act on a write (pods of the MiniCluster image start in ~10-60 s)."""


@dataclass
class KubeSide:
    """The API server a test runs against, and the namespace it has to itself."""

    name: Literal["fake", "real"]
    api: KubeApi
    namespace: str

    @property
    def fake(self) -> FakeKube:
        """The fake itself, for a test's fake-only part (its hooks: finish_pod, fail, ...)."""
        assert isinstance(self.api, FakeKube), "a fake-only hook used on the real cluster"
        return self.api

    @property
    def real(self) -> bool:
        return self.name == "real"

    def eventually(self, what: str, check: Callable[[], T | None], timeout: float = REAL_TIMEOUT) -> T:
        """``check()``'s value once truthy. The fake's controllers have already run: the first look decides. The
        real ones act after the write returned: polled every second for at most ``timeout`` seconds."""
        if not self.real:
            value = check()
            assert value, f"the fake did not: {what}"
            return value
        result: T = wait_until(what, check, timeout=timeout, interval=1.0)
        return result

    def mc(self, name: str = "demo", **spec: Any) -> MiniCluster:
        """A MiniCluster in this side's namespace whose pods run on the real node: its image, a small CPU request."""
        data: KubeObject = {
            "apiVersion": "miniclusters.dev/v1alpha1",
            "kind": "MiniCluster",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "size": 2,
                "minSize": 1,
                "maxSize": 6,
                "interactive": True,
                "containers": [{"image": APP_IMAGE, "resources": {"requests": {"cpu": SMALL_CPU}}}],
            },
        }
        data["spec"].update(copy.deepcopy(spec))
        return load_minicluster(data)

    def pods_of(self, job: str) -> dict[int, Pod]:
        """The Job's pods by completion index, as listed now; pods being deleted (deletionTimestamp set: the real
        kubelet is still stopping them) are left out, as the fake removes a pod at once."""
        listed, _ = self.api.list_objects(POD, self.namespace, f"job-name={job}")
        pods = cast("list[Pod]", listed)  # the pods as either server has them
        return {
            int(p["metadata"]["labels"][INDEX_LABEL]): p
            for p in pods
            if not p["metadata"].get("deletionTimestamp") and INDEX_LABEL in p["metadata"].get("labels", {})
        }

    def pods(self, job: str, indexes: range | list[int], running: bool = False) -> dict[int, Pod]:
        """The Job's pods once they are exactly ``indexes`` (and all Running when ``running``)."""

        def settled() -> dict[int, Pod] | None:
            pods = self.pods_of(job)
            if sorted(pods) != list(indexes):
                return None
            if running and any(p["status"].get("phase") != "Running" for p in pods.values()):
                return None
            return pods

        state = " running" if running else ""
        return self.eventually(f"job {job}'s pods{state} are {list(indexes)}", settled)

    def gone(self, kind: Kind, name: str) -> None:
        """Once ``kind``/``name`` answers 404 (the real garbage collector deletes dependents after the write)."""

        def missing() -> bool:
            try:
                self.api.get(kind, self.namespace, name)
            except ApiError as exc:
                if exc.not_found:
                    return True
                raise
            return False

        self.eventually(f"{kind.kind} {name} is gone", missing)

    def free_millicores(self) -> int:
        """The node's allocatable CPU less the CPU requests of every active pod bound to it (an unschedulable one is
        not), in every namespace: what the kubelet admits a resize against (the real cluster has one node; the
        fake's is ``FakeKube.node_cpu``)."""
        pods, _ = self.api.list_objects(POD, None)
        used = sum(
            cpu_millicores(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
            for p in pods
            if p["spec"].get("nodeName") and p["status"].get("phase") in ("Pending", "Running")
            for c in p["spec"]["containers"]
        )
        if self.real:
            nodes, _ = self.api.list_objects(NODE, None)
            return cpu_millicores(nodes[0]["status"]["allocatable"]["cpu"]) - used
        return cpu_millicores(self.fake.node_cpu) - used
