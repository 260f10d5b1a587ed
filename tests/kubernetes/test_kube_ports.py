"""The Kubernetes backend as the loops see it: the Observer and Actuator ports, a batched resize (one observe, N
patches), and scaling's ceiling taken from what was created."""

from __future__ import annotations

from typing import Any

import pytest

from elasticity.control.loop import Decision, Loop
from elasticity.control.ports import Actuator, Observer, ResizeOutcome
from miniclusters.backends.base import InvalidRequestError
from miniclusters.backends.kubernetes.api import MINICLUSTER
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.ports import ports_for
from miniclusters.testing.fake_kube import FakeKube


def test_resize_many_is_one_observe_and_one_patch_per_pod(backend: KubernetesBackend, fake: FakeKube, make_mc) -> None:
    backend.create(make_mc(size=4))
    fake.calls.clear()
    answers = backend.resize_many("demo", {0: 500, 1: 2000, 2: 64000, 3: 250})
    assert {i: a.outcome for i, a in answers.items()} == {
        0: ResizeOutcome.DONE,
        1: ResizeOutcome.DONE,
        2: ResizeOutcome.INFEASIBLE,
        3: ResizeOutcome.DONE,
    }
    # refused by the apiserver's PodResize admission, as the real server does (403, cause NodeCapacity)
    assert "node didn't have enough allocatable resources" in answers[2].reason
    assert answers[2].cpu_actual == 1000  # unchanged
    assert answers[1].cpu_actual == 2000
    reads = [(c.verb, c.kind) for c in fake.calls if c.verb in ("get", "list")]
    patches = [c for c in fake.calls if c.verb == "patch"]
    assert reads == [("get", "MiniCluster"), ("list", "Pod")], "one observe, no read per pod"
    assert len(patches) == 4 and all(c.subresource == "resize" for c in patches)


def test_scale_down_then_up_without_max_size_keeps_the_created_ceiling(
    backend: KubernetesBackend, fake: FakeKube, spec_data: dict[str, Any]
) -> None:
    from miniclusters.api import load_minicluster

    spec_data["spec"].pop("maxSize")
    spec_data["spec"]["size"] = 3
    backend.create(load_minicluster(spec_data))
    backend.scale("demo", 1)
    assert fake.stored(MINICLUSTER, "demo")["spec"]["maxSize"] == 3, "the ceiling is pinned when size is written"
    status = backend.scale("demo", 3)  # was: "size 3 is above spec.maxSize=1"
    assert status.size == 3 and status.max_size == 3
    with pytest.raises(InvalidRequestError, match=r"above spec\.maxSize=3"):
        backend.scale("demo", 4)


def test_a_loop_runs_unchanged_over_the_kubernetes_ports(backend: KubernetesBackend, make_mc, clock) -> None:
    backend.create(make_mc(size=2))
    observer, actuator = ports_for(backend)
    assert isinstance(observer, Observer) and isinstance(actuator, Actuator)
    view = observer.observe("demo")
    assert (view.size, view.max_size, [p.index for p in view.pods]) == (2, 6, [0, 1])

    def plan(view, options, now) -> Decision:
        return Decision(size=options, cpu={0: 250}, reason="grow and shrink the lead's request")

    loop = Loop("demo", observer, actuator, plan, 4, clock=clock)
    result = loop.step()
    assert result.acted.scaled is not None and result.acted.scaled.size == 4 and not result.acted.error
    assert result.acted.resized[0].outcome == ResizeOutcome.DONE
    after = observer.observe("demo")
    assert after.size == 4 and after.pod(0).cpu_actual == 250  # type: ignore[union-attr]
