"""The Kubernetes rules the fake API server enforces (each citing its docs in kube_rules.py) are the real server's:
every test here but the fake-only one runs against both (the `kube` fixture; docs/kubernetes.md, "Fake and real,
test by test")."""

from __future__ import annotations

import copy
import functools
from typing import Any, cast

import pytest

from elasticity.model.resources import cpu_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.kubernetes.api import CONFIG_MAP, JOB, MINICLUSTER, POD, ApiError
from miniclusters.backends.kubernetes.objects import custom_resource, desired_objects
from miniclusters.kube_shapes import KubeObject, ResourceRequirements
from miniclusters.render import RenderOptions
from miniclusters.testing.fake_kube import FakeKube
from miniclusters.testing.kube_sides import PAUSE_IMAGE, SMALL_CPU, KubeSide


def _create(kube: KubeSide, mc: MiniCluster) -> KubeObject:
    owner = kube.api.create(custom_resource(mc, kube.namespace))
    for obj in desired_objects(mc, kube.namespace, owner, RenderOptions()):
        kube.api.apply(obj, field_manager="miniclusters")
    return kube.api.get(JOB, kube.namespace, mc.name)


def _bare_pod(kube: KubeSide, name: str, resources: ResourceRequirements) -> KubeObject:
    pod: KubeObject = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": kube.namespace},
        "spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE, "resources": resources}]},
    }
    return kube.api.create(pod)


# open: a strategic-merge patch's resources (a null removes one)
def _resize(kube: KubeSide, pod: str, container: str, resources: dict[str, Any]) -> KubeObject:
    body = {"spec": {"containers": [{"name": container, "resources": resources}]}}
    return kube.api.patch(POD, kube.namespace, pod, body, "strategic", subresource="resize")


def test_job_controller_creates_one_pod_per_index_with_hostnames(kube: KubeSide) -> None:
    _create(kube, kube.mc(size=3))
    pods = kube.pods("demo", range(3), running=True)
    assert [pods[i]["spec"]["hostname"] for i in range(3)] == ["demo-0", "demo-1", "demo-2"]


def test_completions_change_only_together_with_parallelism(kube: KubeSide) -> None:
    _create(kube, kube.mc(size=2))
    with pytest.raises(ApiError) as alone:
        kube.api.patch(JOB, kube.namespace, "demo", {"spec": {"completions": 3}})
    assert alone.value.status == 422 and "spec.completions" in alone.value.message
    with pytest.raises(ApiError) as unequal:
        kube.api.patch(JOB, kube.namespace, "demo", {"spec": {"completions": 4, "parallelism": 3}})
    assert unequal.value.status == 422 and "spec.completions" in unequal.value.message
    kube.api.patch(JOB, kube.namespace, "demo", {"spec": {"completions": 4, "parallelism": 4}})
    kube.pods("demo", range(4))
    assert kube.api.get(JOB, kube.namespace, "demo")["spec"]["completions"] == 4
    kube.api.patch(JOB, kube.namespace, "demo", {"spec": {"completions": 1, "parallelism": 1}})
    kube.pods("demo", [0])  # scaling down removes the highest indexes


def test_job_pod_template_is_immutable(kube: KubeSide) -> None:
    _create(kube, kube.mc(size=1))
    with pytest.raises(ApiError) as error:
        kube.api.patch(JOB, kube.namespace, "demo", {"spec": {"template": {"metadata": {"labels": {"x": "y"}}}}})
    assert error.value.status == 422
    assert "spec.template" in error.value.message and "field is immutable" in error.value.message


def test_pod_resources_change_only_through_resize(kube: KubeSide) -> None:
    _create(kube, kube.mc())
    name = kube.pods("demo", range(2), running=True)[1]["metadata"]["name"]
    body = {"spec": {"containers": [{"name": "demo", "resources": {"requests": {"cpu": "100m"}}}]}}
    with pytest.raises(ApiError) as error:
        kube.api.patch(POD, kube.namespace, name, body, "strategic")
    assert error.value.status == 422 and "pod updates may not change fields" in error.value.message
    _resize(kube, name, "demo", {"requests": {"cpu": "100m"}})

    def actuated() -> bool:
        status = kube.api.get(POD, kube.namespace, name)["status"]["containerStatuses"][0]
        return bool(status["resources"]["requests"]["cpu"] == "100m")

    kube.eventually("the kubelet actuates the resize", actuated)


def test_resize_cannot_change_qos_or_remove_requests(kube: KubeSide) -> None:
    _bare_pod(
        kube, "solo", {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
    )
    with pytest.raises(ApiError) as qos:
        _resize(kube, "solo", "main", {"requests": {"cpu": "50m"}})  # Guaranteed -> Burstable
    assert qos.value.status == 422 and "QOS" in qos.value.message.upper()
    _resize(kube, "solo", "main", {"requests": {"cpu": "50m"}, "limits": {"cpu": "50m"}})
    body = {"spec": {"containers": [{"name": "main", "image": "elsewhere:1", "resources": {"limits": {"cpu": "50m"}}}]}}
    resized = kube.api.patch(POD, kube.namespace, "solo", body, "strategic", subresource="resize")
    assert resized["spec"]["containers"][0]["image"] == PAUSE_IMAGE, "resize takes resources only, drops the rest"
    with pytest.raises(ApiError) as other:
        _resize(kube, "solo", "main", {"requests": {"ephemeral-storage": "1Gi"}})
    assert other.value.status == 422 and "only cpu and memory resources are mutable" in other.value.message
    _bare_pod(kube, "burst", {"requests": {"cpu": "50m", "memory": "32Mi"}})
    with pytest.raises(ApiError) as removed:
        _resize(kube, "burst", "main", {"requests": {"cpu": None}})
    assert removed.value.status == 422 and "cannot be removed" in removed.value.message


def test_restart_policy_never_needs_resize_policy_not_required(kube: KubeSide) -> None:
    mc = kube.mc(size=1)
    owner = kube.api.create(custom_resource(mc, kube.namespace))
    job = desired_objects(mc, kube.namespace, owner, RenderOptions())[-1]
    pod_spec = job["spec"]["template"]["spec"]
    pod_spec["restartPolicy"] = "Never"
    pod_spec["containers"][0]["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]
    with pytest.raises(ApiError) as error:
        kube.api.apply(job, field_manager="miniclusters")
    assert error.value.status == 422 and "NotRequired" in error.value.message
    pod_spec["containers"][0]["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]
    kube.api.apply(job, field_manager="miniclusters")


def test_stale_resource_version_conflicts_and_deleted_objects_are_404(kube: KubeSide) -> None:
    _create(kube, kube.mc(size=1))
    stale = kube.api.get(CONFIG_MAP, kube.namespace, "demo-flux-config")
    fresh = copy.deepcopy(stale)
    fresh["data"]["extra"] = "1"
    kube.api.replace(fresh)
    stale["data"]["extra"] = "2"
    with pytest.raises(ApiError) as conflict:
        kube.api.replace(stale)
    assert conflict.value.status == 409 and "the object has been modified" in conflict.value.message
    del stale["metadata"]["resourceVersion"]
    assert kube.api.replace(stale)["data"]["extra"] == "2", "a built-in kind takes an unconditional update"
    kube.pods("demo", [0])
    kube.api.delete(MINICLUSTER, kube.namespace, "demo")
    with pytest.raises(ApiError) as gone:
        kube.api.get(MINICLUSTER, kube.namespace, "demo")
    assert gone.value.status == 404
    # owner references cascade: the garbage collector deletes the Job and the ConfigMap, then the Job's pods
    kube.gone(JOB, "demo")
    kube.gone(CONFIG_MAP, "demo-flux-config")
    kube.eventually("the Job's pods are gone", lambda: kube.pods_of("demo") == {})


def test_schema_validation_and_unknown_fields(kube: KubeSide) -> None:
    ns = kube.namespace
    kube.api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}})
    with pytest.raises(ApiError) as undecodable:  # a number where the data's values are strings: refused
        kube.api.create(
            cast(KubeObject, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}, "data": {"a": 1}})
        )
    assert undecodable.value.status == 400
    assert "cannot unmarshal number into Go struct field ConfigMap.data of type string" in undecodable.value.message
    with pytest.raises(ApiError) as in_a_patch:
        kube.api.patch(CONFIG_MAP, ns, "x", {"data": {"a": 1}})
    assert in_a_patch.value.status == 422 and "patch: Invalid value" in in_a_patch.value.message
    with pytest.raises(ApiError) as applied:  # server-side apply builds a typed patch first: that fails, 500
        kube.api.apply(
            cast(KubeObject, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"a": 1}}),
            "t",
        )
    assert applied.value.status == 500 and "failed to create typed patch object" in applied.value.message
    with pytest.raises(ApiError) as required:
        kube.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"}, "spec": {}})
    assert required.value.status == 422 and "spec.containers: Required value" in required.value.message
    # no fieldValidation sent: the server's default (Warn) drops unknown fields and says so in a warning
    # unknown fields (metadata.labelz, dataa): the shape has no such keys, so a cast says it is deliberate
    cm = cast(
        KubeObject, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "z", "labelz": {}}, "dataa": {}}
    )
    created = kube.api.create(cm)
    assert "dataa" not in created and "labelz" not in created["metadata"]
    if not kube.real:  # the real client does not read warnings
        assert sorted(kube.fake.warnings) == ['unknown field "dataa"', 'unknown field "metadata.labelz"']
    with pytest.raises(ApiError) as applied_unknown:  # apply knows no Warn: the typed patch fails
        kube.api.apply({**cm, "metadata": {"name": "v"}}, "t")
    assert applied_unknown.value.status == 500 and "field not declared in schema" in applied_unknown.value.message


def test_node_ports_are_allocated_once_within_the_range(kube: KubeSide) -> None:
    def service(name: str, **port: int) -> KubeObject:
        spec = {"type": "NodePort", "selector": {"app": name}, "ports": [{"port": 80, **port}]}
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}

    allocated = kube.api.create(service("a"))["spec"]["ports"][0]["nodePort"]
    assert 30000 <= allocated <= 32767
    with pytest.raises(ApiError) as taken:
        kube.api.create(service("b", nodePort=allocated))
    assert taken.value.status == 422 and "provided port is already allocated" in taken.value.message
    with pytest.raises(ApiError) as outside:
        kube.api.create(service("c", nodePort=80))
    assert outside.value.status == 422 and "not in the valid range" in outside.value.message


def test_scale_subresource_and_what_a_custom_resource_refuses(kube: KubeSide) -> None:
    ns = kube.namespace
    kube.api.create(custom_resource(kube.mc(), ns))
    scale = kube.api.patch(MINICLUSTER, ns, "demo", {"spec": {"replicas": 3}}, subresource="scale")
    assert scale["spec"]["replicas"] == 3 and kube.api.get(MINICLUSTER, ns, "demo")["spec"]["size"] == 3
    with pytest.raises(ApiError) as zero:
        kube.api.patch(MINICLUSTER, ns, "demo", {"spec": {"replicas": 0}}, subresource="scale")
    assert zero.value.status == 422 and "spec.size" in zero.value.message  # the CRD's minimum holds
    with pytest.raises(ApiError) as strategic:
        kube.api.patch(MINICLUSTER, ns, "demo", {"spec": {"size": 2}}, "strategic")
    assert strategic.value.status == 415
    with pytest.raises(ApiError) as no_manager:
        kube.api.apply(custom_resource(kube.mc(), ns), field_manager="")
    assert no_manager.value.status == 422 and "fieldManager" in no_manager.value.message
    unconditional = kube.api.get(MINICLUSTER, ns, "demo")
    del unconditional["metadata"]["resourceVersion"]
    with pytest.raises(ApiError) as no_version:
        kube.api.replace(unconditional)
    assert no_version.value.status == 422 and "must be specified for an update" in no_version.value.message
    with pytest.raises(ApiError) as no_resize:
        kube.api.patch(JOB, ns, "demo", {"spec": {}}, subresource="resize")
    assert no_resize.value.status == 404


def test_an_unschedulable_pod_is_pending_unbound_no_exec_and_resizes_unchecked(kube: KubeSide) -> None:
    _bare_pod(kube, "big", {"requests": {"cpu": "100"}})

    def unschedulable() -> bool:
        conditions = kube.api.get(POD, kube.namespace, "big")["status"].get("conditions", [])
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)

    kube.eventually("the pod is Unschedulable", unschedulable, timeout=60)
    with pytest.raises(ApiError) as error:
        kube.api.exec(kube.namespace, "big", None, ["hostname"])
    assert error.value.status == 400 and "does not have a host assigned" in error.value.message
    # the PodResize admission weighs a pod bound to a node only: this one's resize past any node goes through
    resized = _resize(kube, "big", "main", {"requests": {"cpu": "200"}})
    assert resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "200"


def _running(kube: KubeSide, name: str) -> bool:
    return bool(kube.api.get(POD, kube.namespace, name)["status"].get("phase") == "Running")


def test_a_resize_past_what_is_free_is_deferred_and_applied_once_room_frees(kube: KubeSide) -> None:
    """More than is free now but within the node: the kubelet answers PodResizePending/Deferred and keeps the pod's
    CPU; it applies the resize by itself once another pod gives CPU back (seen on v1.37.2: within seconds)."""
    _bare_pod(kube, "giver", {"requests": {"cpu": "100m"}})
    _bare_pod(kube, "taker", {"requests": {"cpu": SMALL_CPU}})
    for name in ("giver", "taker"):
        kube.eventually(f"{name} runs", functools.partial(_running, kube, name))
    want = cpu_millicores(SMALL_CPU) + kube.free_millicores() + 50

    def state(name: str) -> tuple[str | None, str | None]:
        pod = kube.api.get(POD, kube.namespace, name)
        pending = next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodResizePending"), None)
        statuses = pod["status"].get("containerStatuses", [])
        actual = ((statuses[0].get("resources") or {}).get("requests") or {}).get("cpu") if statuses else None
        return (pending.get("reason") if pending else None), actual

    _resize(kube, "taker", "main", {"requests": {"cpu": f"{want}m"}})
    kube.eventually("the resize is Deferred", lambda: state("taker")[0] == "Deferred", timeout=60)
    assert cpu_millicores(state("taker")[1] or "0") == cpu_millicores(SMALL_CPU)
    _resize(kube, "giver", "main", {"requests": {"cpu": "10m"}})
    kube.eventually(
        "the deferred resize is applied",
        lambda: (lambda now: now[0] is None and cpu_millicores(now[1] or "0") == want)(state("taker")),
        timeout=120,
    )


def test_injected_transient_errors() -> None:
    """Fake-only: a real server cannot be told to throttle the next call."""
    fake = FakeKube(namespace="hpc")
    fake.fail("create", 429)
    cm: KubeObject = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
    with pytest.raises(ApiError) as throttled:
        fake.create(cm)
    assert throttled.value.status == 429 and throttled.value.transient
    fake.create(cm)


def test_the_crd_s_cel_rules_refuse_what_validate_refuses_naming_the_field(kube: KubeSide) -> None:
    """`kubectl apply` of `size: 3, maxSize: 2` is refused by the API server itself, with the field path and the
    words of `minicluster validate` (the CRD's x-kubernetes-validations, api/crd_rules.py); the fake evaluates the
    same CEL."""

    def raw(name: str, **sizes: int) -> KubeObject:
        obj = custom_resource(kube.mc(name, size=1, maxSize=6, minSize=0), kube.namespace)
        obj["spec"].update(sizes)  # past our validator: what a user's YAML may say
        return obj

    with pytest.raises(ApiError) as refused:
        kube.api.create(raw("bad", size=3, maxSize=2))
    assert refused.value.status == 422
    assert refused.value.message == (
        'MiniCluster.miniclusters.dev "bad" is invalid: spec.maxSize: Invalid value: '
        "maxSize (2) must not be smaller than size (3)"
    )
    with pytest.raises(ApiError) as both:
        kube.api.create(raw("worse", size=3, maxSize=2, minSize=5))
    assert both.value.message == (
        'MiniCluster.miniclusters.dev "worse" is invalid: [spec.minSize: Invalid value: minSize (5) must '
        "not exceed maxSize (2), spec.maxSize: Invalid value: maxSize (2) must not be smaller than size (3)]"
    )
    kube.api.create(raw("good", size=2, maxSize=4, minSize=1))  # within the rules: stored
    with pytest.raises(ApiError) as scaled:  # `kubectl scale --replicas 9`: the same rule, through /scale
        kube.api.patch(MINICLUSTER, kube.namespace, "good", {"spec": {"replicas": 9}}, subresource="scale")
    assert scaled.value.message == (
        'MiniCluster.miniclusters.dev "good" is invalid: spec.maxSize: Invalid value: '
        "maxSize (4) must not be smaller than size (9)"
    )
    assert kube.api.get(MINICLUSTER, kube.namespace, "good")["spec"]["size"] == 2
    # the multiplexing counts and the REST port, inside objects whose defaults the server fills in first
    mux = raw("mux")
    mux["spec"]["multiplexing"] = {"max": 3, "total": 2}
    with pytest.raises(ApiError) as counts:
        kube.api.create(mux)
    assert counts.value.message == (
        'MiniCluster.miniclusters.dev "mux" is invalid: spec.multiplexing.total: Invalid value: '
        "2 is below max (3); use 0 for 'as many as max'"
    )
    rest = raw("rest")
    rest["spec"]["restful"] = {"enabled": True, "port": 8050}
    with pytest.raises(ApiError) as port:
        kube.api.create(rest)
    assert port.value.message == (
        'MiniCluster.miniclusters.dev "rest" is invalid: spec.restful.port: Invalid value: '
        "8050 is the brokers' overlay port; choose another"
    )
