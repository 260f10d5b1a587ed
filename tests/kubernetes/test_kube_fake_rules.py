"""The fake API server enforces the Kubernetes rules we rely on (each rule cites its docs in fake_kube.py)."""

from __future__ import annotations

import copy

import pytest

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.kubernetes.api import CONFIG_MAP, JOB, MINICLUSTER, POD, ApiError
from miniclusters.backends.kubernetes.objects import custom_resource, desired_objects
from miniclusters.render import RenderOptions
from miniclusters.testing.fake_kube import FakeKube


def _create(fake: FakeKube, mc: MiniCluster) -> dict:
    owner = fake.create(custom_resource(mc, "hpc"))
    for obj in desired_objects(mc, "hpc", owner, RenderOptions()):
        fake.apply(obj, field_manager="miniclusters")
    return fake.stored(JOB, mc.name)


def test_job_controller_creates_one_pod_per_index_with_hostnames(fake: FakeKube, make_mc) -> None:
    _create(fake, make_mc(size=3))
    pods = fake.pods_of("demo")
    assert sorted(pods) == [0, 1, 2]
    assert [pods[i]["spec"]["hostname"] for i in range(3)] == ["demo-0", "demo-1", "demo-2"]
    assert all(p["status"]["phase"] == "Running" for p in pods.values())


def test_completions_change_only_together_with_parallelism(fake: FakeKube, make_mc) -> None:
    job = _create(fake, make_mc(size=2))
    with pytest.raises(ApiError) as alone:
        fake.patch(JOB, "hpc", "demo", {"spec": {"completions": 3}})
    assert alone.value.status == 422 and "completions" in alone.value.message
    with pytest.raises(ApiError):
        fake.patch(JOB, "hpc", "demo", {"spec": {"completions": 4, "parallelism": 3}})
    fake.patch(JOB, "hpc", "demo", {"spec": {"completions": 4, "parallelism": 4}})
    assert sorted(fake.pods_of("demo")) == [0, 1, 2, 3]
    assert job["spec"]["completions"] == 4
    fake.patch(JOB, "hpc", "demo", {"spec": {"completions": 1, "parallelism": 1}})
    assert sorted(fake.pods_of("demo")) == [0], "scaling down removes the highest indexes"


def test_job_pod_template_is_immutable(fake: FakeKube, make_mc) -> None:
    _create(fake, make_mc())
    with pytest.raises(ApiError) as error:
        fake.patch(JOB, "hpc", "demo", {"spec": {"template": {"metadata": {"labels": {"x": "y"}}}}})
    assert error.value.status == 422 and "spec.template: field is immutable" in error.value.message


def test_pod_resources_change_only_through_resize(fake: FakeKube, make_mc) -> None:
    _create(fake, make_mc())
    pod = fake.pods_of("demo")[1]
    name = pod["metadata"]["name"]
    body = {"spec": {"containers": [{"name": "demo", "resources": {"requests": {"cpu": "2"}}}]}}
    with pytest.raises(ApiError) as error:
        fake.patch(POD, "hpc", name, body, "strategic")
    assert error.value.status == 422 and "resize subresource" in error.value.message
    fake.patch(POD, "hpc", name, body, "strategic", subresource="resize")
    assert fake.pods_of("demo")[1]["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "2"


def test_resize_cannot_change_qos_or_remove_requests(fake: FakeKube, make_mc) -> None:
    guaranteed = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "solo", "namespace": "hpc"},
        "spec": {"containers": [{"name": "main", "image": "app:1", "resources": guaranteed}]},
    }
    fake.create(pod)
    with pytest.raises(ApiError) as qos:
        body = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "500m"}}}]}}
        fake.patch(POD, "hpc", "solo", body, "strategic", subresource="resize")
    assert qos.value.status == 422 and "QoS" in qos.value.message
    both = {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}
    fake.patch(
        POD, "hpc", "solo", {"spec": {"containers": [{"name": "main", "resources": both}]}}, "strategic", "resize"
    )
    _create(fake, make_mc())
    name = fake.pods_of("demo")[0]["metadata"]["name"]
    with pytest.raises(ApiError) as removed:
        body = {"spec": {"containers": [{"name": "demo", "resources": {"requests": {"cpu": None}}}]}}
        fake.patch(POD, "hpc", name, body, "strategic", subresource="resize")
    assert "cannot be removed" in removed.value.message


def test_restart_policy_never_needs_resize_policy_not_required(fake: FakeKube, make_mc) -> None:
    mc = make_mc()
    owner = fake.create(custom_resource(mc, "hpc"))
    job = desired_objects(mc, "hpc", owner, RenderOptions())[-1]
    pod_spec = job["spec"]["template"]["spec"]
    pod_spec["restartPolicy"] = "Never"
    pod_spec["containers"][0]["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]
    with pytest.raises(ApiError) as error:
        fake.apply(job, field_manager="miniclusters")
    assert error.value.status == 422 and "NotRequired" in error.value.message
    pod_spec["containers"][0]["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]
    fake.apply(job, field_manager="miniclusters")


def test_stale_resource_version_conflicts_and_deleted_objects_are_404(fake: FakeKube, make_mc) -> None:
    _create(fake, make_mc())
    stale = fake.get(CONFIG_MAP, "hpc", "demo-flux-config")
    fresh = copy.deepcopy(stale)
    fresh["data"]["extra"] = "1"
    fake.replace(fresh)
    stale["data"]["extra"] = "2"
    with pytest.raises(ApiError) as conflict:
        fake.replace(stale)
    assert conflict.value.status == 409
    fake.delete(MINICLUSTER, "hpc", "demo")
    for kind, name in ((MINICLUSTER, "demo"), (JOB, "demo"), (CONFIG_MAP, "demo-flux-config")):
        with pytest.raises(ApiError) as gone:
            fake.get(kind, "hpc", name)
        assert gone.value.status == 404
    assert fake.pods_of("demo") == {}, "owner references cascade to the Job's pods"


def test_injected_transient_errors_and_schema_validation(fake: FakeKube) -> None:
    fake.fail("create", 429)
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
    with pytest.raises(ApiError) as throttled:
        fake.create(bad)
    assert throttled.value.status == 429 and throttled.value.transient
    fake.create(bad)
    with pytest.raises(ApiError) as invalid:
        fake.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}, "data": {"a": 1}})
    assert invalid.value.status == 422
    with pytest.raises(ApiError) as unknown_field:
        fake.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "z"}, "dataa": {}})
    assert unknown_field.value.status == 422
