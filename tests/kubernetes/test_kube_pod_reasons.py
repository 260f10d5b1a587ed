"""What the real kubelet reports about a pod that cannot start reaches `up` and `status` (seen on the real cluster
of `minicluster kube up`: an init container failing left `up` saying only "0/4 pods running" for its timeout)."""

from __future__ import annotations

import pytest

from miniclusters.backends.base import BackendError, ClusterStatus, PodStatus
from miniclusters.backends.kubernetes.status import container_reason
from miniclusters.backends.wait import is_up
from miniclusters.kube_shapes import ContainerState, Pod, PodObjectStatus


def _pod(init_state: ContainerState | None, main_state: ContainerState) -> Pod:
    status: PodObjectStatus = {"phase": "Pending", "containerStatuses": [{"name": "app", "state": main_state}]}
    if init_state is not None:
        status["initContainerStatuses"] = [{"name": "miniclusters-broker", "state": init_state}]
    return {"metadata": {"name": "hello-0"}, "spec": {"containers": [{"name": "app"}]}, "status": status}


def test_a_failing_init_container_is_the_pods_reason_as_kubectl_shows_it() -> None:
    waiting_init: ContainerState = {"waiting": {"reason": "PodInitializing"}}
    crashing = _pod({"waiting": {"reason": "CrashLoopBackOff"}}, waiting_init)
    assert container_reason(crashing) == "Init:CrashLoopBackOff"
    failed = _pod({"terminated": {"exitCode": 1, "reason": "Error"}}, waiting_init)
    assert container_reason(failed) == "Init:Error"
    done = _pod({"terminated": {"exitCode": 0, "reason": "Completed"}}, {"running": {}})
    assert container_reason(done) is None
    assert container_reason(_pod(None, {"waiting": {"reason": "ImagePullBackOff"}})) == "ImagePullBackOff"


def _cluster(*pods: PodStatus) -> ClusterStatus:
    return ClusterStatus(name="hello", namespace="default", size=len(pods), max_size=len(pods), min_size=1, pods=pods)


def test_up_says_why_pods_wait() -> None:
    done, message = is_up(_cluster(PodStatus(0, "hello-0", "Pending", reason="Init:CrashLoopBackOff")))
    assert not done
    assert "hello-0: Init:CrashLoopBackOff" in message


@pytest.mark.parametrize("reason", ["ErrImageNeverPull", "Init:ErrImageNeverPull", "InvalidImageName"])
def test_up_stops_at_once_for_a_pod_that_can_never_start(reason: str) -> None:
    with pytest.raises(BackendError, match=f"hello-1 \\({reason}\\)"):
        is_up(_cluster(PodStatus(0, "hello-0", "Running"), PodStatus(1, "hello-1", "Pending", reason=reason)))


def test_a_resize_refused_for_node_capacity_is_recognised_from_the_real_servers_body() -> None:
    """The body kube-apiserver v1.37.2 sent here for a resize past the node's allocatable CPU."""
    from miniclusters.backends.kubernetes.actuate import is_capacity_refusal
    from miniclusters.backends.kubernetes.client import _status_error

    body = (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"t2\\" is '
        "forbidden: node didn't have enough allocatable resources: cpu, requested: 100000, allocatable: 2000\","
        '"reason":"Forbidden","details":{"name":"t2","kind":"pods","causes":[{"reason":"NodeCapacity"}]},'
        '"code":403}'
    )
    error = _status_error(403, body, "Forbidden")
    assert error.causes == ("NodeCapacity",)
    assert is_capacity_refusal(error)
    assert not is_capacity_refusal(_status_error(403, body.replace("NodeCapacity", "Other"), "Forbidden"))
