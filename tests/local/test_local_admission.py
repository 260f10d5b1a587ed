"""The local node answers resizes as a kubelet does (Infeasible / Deferred with the reason, nothing applied,
status shows it), and scaling's ceiling is what was created, not the size scaled from (issue 13)."""

from __future__ import annotations

import json
import os
from typing import Any

from elasticity.control.ports import ResizeOutcome
from elasticity.model.resources import format_millicores
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.backends.ports import ports_for


def _status(mc: Any, name: str) -> dict[str, Any]:
    result = mc("status", name, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _pending(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod["conditions"] if c["type"] == "PodResizePending" and c["status"] == "True"), None)


def test_resize_beyond_the_node_is_infeasible_and_beside_others_deferred(
    mc: Any, machine: Any, backend: LocalBackend, spec_writer: Any
) -> None:
    capacity = len(os.sched_getaffinity(0)) * 1000
    spec = spec_writer(machine.state_dir, "adm", size=2, max_size=2, cpu="500m")
    assert mc("up", str(spec), "--detach").returncode == 0
    knob, weight = backend.kernel_weight("adm", 1)

    too_big = format_millicores(capacity + 62000)  # "64" on a 2-core machine
    infeasible = mc("resize", "adm", "1", "--cpu", too_big)
    assert infeasible.returncode == 1, infeasible.stdout + infeasible.stderr
    assert "infeasible" in infeasible.stdout and "Node didn't have enough capacity" in infeasible.stdout
    assert f"capacity: {format_millicores(capacity)}" in infeasible.stdout and "done" not in infeasible.stdout
    assert backend.kernel_weight("adm", 1) == (knob, weight)  # nothing applied
    pod = _status(mc, "adm")["pods"][1]
    assert pod["cpu_desired"] == too_big and pod["cpu_actual"] == "500m"
    assert (_pending(pod) or {}).get("reason") == "Infeasible"

    # Fits the node, but not beside pod 0's 500m request: Deferred, and still nothing applied.
    beside = format_millicores(capacity - 400)
    deferred = mc("resize", "adm", "1", "--cpu", beside)
    assert deferred.returncode == 1 and "deferred" in deferred.stdout, deferred.stdout + deferred.stderr
    assert "used: 500m" in deferred.stdout
    assert backend.kernel_weight("adm", 1) == (knob, weight)
    pod = _status(mc, "adm")["pods"][1]
    assert (_pending(pod) or {}).get("reason") == "Deferred" and pod["cpu_actual"] == "500m"

    # The loops see the same through the ports: the pending request, the CPU it still runs with, the node.
    observer, actuator = ports_for(backend)
    view = observer.observe("adm")
    pod1 = view.pod(1)
    assert pod1 is not None and pod1.resize == ResizeOutcome.DEFERRED and "used: 500m" in pod1.resize_reason
    assert (pod1.cpu_request, pod1.cpu_actual) == (capacity - 400, 500)
    assert [n.allocatable_millicores for n in view.nodes] == [capacity] and view.max_size == 2
    batch = actuator.resize_many("adm", {0: 400, 1: 300})
    assert {i: a.outcome for i, a in batch.items()} == {0: ResizeOutcome.DONE, 1: ResizeOutcome.DONE}
    assert [p.cpu_actual for p in observer.observe("adm").pods] == [400, 300]

    # A request that fits is applied, and the pending condition goes away.
    done = mc("resize", "adm", "1", "--cpu", "250m")
    assert done.returncode == 0 and "done" in done.stdout, done.stdout + done.stderr
    pod = _status(mc, "adm")["pods"][1]
    assert _pending(pod) is None and pod["cpu_desired"] == pod["cpu_actual"] == "250m"
    assert mc("down", "adm").returncode == 0


def test_scale_down_then_up_without_max_size_keeps_the_created_ceiling(mc: Any, machine: Any, spec_writer: Any) -> None:
    spec = spec_writer(machine.state_dir, "nomax", size=2, max_size=None, min_size=0, cpu=None)
    assert mc("up", str(spec), "--detach").returncode == 0
    down = mc("scale", "nomax", "1")
    assert down.returncode == 0, down.stderr
    up = mc("scale", "nomax", "2")
    assert up.returncode == 0, up.stderr  # was: "size 2 is above spec.maxSize=1"
    status = _status(mc, "nomax")
    assert status["size"] == 2 and status["max_size"] == 2
    high = mc("scale", "nomax", "3")
    assert high.returncode == 2 and "above spec.maxSize=2" in high.stderr
    assert mc("down", "nomax").returncode == 0
