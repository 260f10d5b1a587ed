"""The Kubernetes backend against the fake API server: create, scale, resize, exec, logs, delete, bad input."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from miniclusters.backends import get_backend
from miniclusters.backends.base import (
    Backend,
    BackendError,
    BackendTimeoutError,
    CreateOptions,
    ForbiddenError,
    InvalidRequestError,
    MissingAPIError,
    NotFoundError,
    ResizeOutcome,
    UnreachableError,
)
from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER, POD, SECRET
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.wait import WaitProgress
from miniclusters.render.layout import FIELD_MANAGER
from miniclusters.testing.fake_kube import FakeKube
from miniclusters.testing.kube_sides import PAUSE_IMAGE, SMALL_CPU, KubeSide


def test_backend_satisfies_the_protocol(backend: KubernetesBackend) -> None:
    assert isinstance(backend, Backend)


def test_up_applies_the_cluster_then_owned_objects_and_waits_for_brokers(
    backend: KubernetesBackend, fake: FakeKube, make_mc
) -> None:
    status = backend.create(make_mc(size=3))
    writes = [(c.verb, c.kind) for c in fake.writes()]
    assert writes == [("apply", k) for k in ("MiniCluster", "Secret", "ConfigMap", "Service", "Job")]
    owner = fake.stored(MINICLUSTER, "demo")
    for kind, name in ((SECRET, "demo-curve-cert"), (JOB, "demo")):
        (ref,) = fake.stored(kind, name)["metadata"]["ownerReferences"]
        assert ref["uid"] == owner["metadata"]["uid"] and ref["controller"] is True
    assert status.running_pods == 3 and status.ranks_up == (0, 1, 2)
    assert any(c.verb == "exec" and "overlay" in c.body for c in fake.calls), "the lead was asked"


def test_up_waits_with_progress_and_times_out_when_pods_never_run(fake: FakeKube, clock, make_mc) -> None:
    fake.start_pods = False
    seen: list[WaitProgress] = []
    backend = KubernetesBackend(api=fake, clock=clock, sleep=clock.sleep, progress=seen.append, poll_interval=5.0)
    with pytest.raises(BackendTimeoutError, match="0/2 pods running"):
        backend.create(make_mc(), CreateOptions(timeout=30))
    assert seen and seen[-1].running == 0 and clock.slept == [5.0] * len(clock.slept)


def test_up_twice_is_idempotent_and_keeps_the_certificate(backend: KubernetesBackend, fake: FakeKube, make_mc) -> None:
    backend.create(make_mc())
    cert = fake.stored(SECRET, "demo-curve-cert")["data"]
    pods = {i: p["metadata"]["uid"] for i, p in fake.pods_of("demo").items()}
    backend.create(make_mc())
    assert fake.stored(SECRET, "demo-curve-cert")["data"] == cert
    assert {i: p["metadata"]["uid"] for i, p in fake.pods_of("demo").items()} == pods
    assert len(fake.all_of(JOB)) == 1
    assert base64.b64decode(cert["curve.cert"]).startswith(b"#")


def test_up_with_a_changed_template_says_the_template_is_immutable(kube: KubeSide) -> None:
    """Against both API servers: the backend knows the server's 422 for a changed Job pod template."""
    backend = KubernetesBackend(api=kube.api, namespace=kube.namespace, sleep=lambda _s: None)
    backend.create(kube.mc(size=1), CreateOptions(wait=False))
    changed = kube.mc(size=1, containers=[{"image": PAUSE_IMAGE, "resources": {"requests": {"cpu": SMALL_CPU}}}])
    with pytest.raises(InvalidRequestError, match="immutable") as refused:
        backend.create(changed, CreateOptions(wait=False))
    assert f"minicluster down demo --backend kubernetes -n {kube.namespace})" in str(refused.value)  # as printed


def test_exec_and_delete_on_both(kube: KubeSide) -> None:
    """Against both API servers: exec in a pod, then delete (Foreground: on the real server the MiniCluster stays,
    being deleted, until the garbage collector has deleted what it owns; the fake removes all at once)."""
    backend = KubernetesBackend(api=kube.api, namespace=kube.namespace, sleep=lambda _s: None)
    backend.create(kube.mc(size=2), CreateOptions(wait=False))
    kube.pods("demo", range(2), running=True)
    assert backend.exec("demo", 1, ["hostname"]).stdout == "demo-1\n"
    missing = backend.exec("demo", 1, ["no-such-command"])
    assert missing.rc == 127 and "no-such-command" in missing.stderr
    backend.delete("demo")
    kube.gone(MINICLUSTER, "demo")
    kube.gone(JOB, "demo")
    kube.eventually("the pods are gone", lambda: kube.pods_of("demo") == {})
    with pytest.raises(NotFoundError, match=f"'demo' not found in namespace '{kube.namespace}'"):
        backend.delete("demo")
    with pytest.raises(NotFoundError):
        backend.status("demo")


def test_scale_up_and_down_patches_parallelism_and_completions_together(
    backend: KubernetesBackend, fake: FakeKube, make_mc
) -> None:
    backend.create(make_mc())
    status = backend.scale("demo", 5)
    job = fake.stored(JOB, "demo")["spec"]
    assert job["parallelism"] == job["completions"] == 5 and status.running_pods == 5
    assert fake.stored(MINICLUSTER, "demo")["spec"]["size"] == 5
    patches = [c.body for c in fake.calls if c.verb == "patch" and c.kind == "Job"]
    assert patches[-1]["spec"] == {"parallelism": 5, "completions": 5}
    status = backend.scale("demo", 1)
    assert [p.index for p in status.pods] == [0], "scaling down keeps the lead"


@pytest.mark.parametrize(("size", "words"), [(0, "below 1"), (7, "above spec.maxSize=6")])
def test_scale_out_of_range_changes_nothing(backend: KubernetesBackend, fake: FakeKube, make_mc, size, words) -> None:
    backend.create(make_mc())
    before = len(fake.writes())
    with pytest.raises(InvalidRequestError, match=words) as error:
        backend.scale("demo", size)
    assert error.value.exit_code == 2 and "[1, 6]" in str(error.value)
    assert len(fake.writes()) == before


def test_scale_respects_min_size(backend: KubernetesBackend, make_mc) -> None:
    backend.create(make_mc(size=3, minSize=3))
    with pytest.raises(InvalidRequestError, match="minSize=3"):
        backend.scale("demo", 2)


def test_scale_retries_after_a_concurrent_job_update(backend: KubernetesBackend, fake: FakeKube, make_mc) -> None:
    backend.create(make_mc())
    job_patches: list[int] = []
    original = fake.patch

    def racing_patch(kind, *args, **kwargs):  # another writer relabels the Job just before our first patch lands
        if kind == JOB:
            job_patches.append(1)
            if len(job_patches) == 1:
                original(JOB, "hpc", "demo", {"metadata": {"labels": {"touched": "yes"}}})
        return original(kind, *args, **kwargs)

    fake.patch = racing_patch  # type: ignore[method-assign]
    backend.scale("demo", 3)
    assert len(job_patches) == 2, "the 409 was answered by reading the Job again"
    assert fake.stored(JOB, "demo")["spec"]["parallelism"] == 3


def test_transient_errors_are_retried_with_backoff(backend: KubernetesBackend, fake: FakeKube, clock, make_mc) -> None:
    fake.fail("apply", 429, count=2)
    fake.fail("get", 503, kind=SECRET)
    backend.create(make_mc())
    assert clock.slept[:3] == [0.25, 0.5, 0.25]
    assert len(fake.all_of(JOB)) == 1


def test_persistent_server_errors_give_a_message(backend: KubernetesBackend, fake: FakeKube, make_mc) -> None:
    fake.fail("apply", 500, kind=JOB, count=99)
    with pytest.raises(BackendError, match="applying Job 'demo': 500"):
        backend.create(make_mc())


def test_resize_done_deferred_infeasible_and_in_progress(backend: KubernetesBackend, fake: FakeKube, make_mc) -> None:
    backend.create(make_mc(size=2))
    done = backend.resize("demo", 1, "2")
    assert done.outcome is ResizeOutcome.DONE and done.cpu_actual == "2"
    uid = fake.pods_of("demo")[1]["metadata"]["uid"]
    infeasible = backend.resize("demo", 1, "64")
    assert infeasible.outcome is ResizeOutcome.INFEASIBLE and "capacity" in infeasible.message
    assert not infeasible.ok and infeasible.cpu_actual == "2"
    deferred = backend.resize("demo", 0, "15")
    assert deferred.outcome is ResizeOutcome.DEFERRED and "used" in deferred.message
    fake.kubelet = "in-progress"
    assert backend.resize("demo", 1, "3").outcome is ResizeOutcome.IN_PROGRESS
    fake.kubelet = "accept"
    fake.run_controllers()
    resized = backend.status("demo").pod(1)
    assert resized is not None and resized.cpu_actual == "3"
    pod = fake.pods_of("demo")[1]
    assert pod["metadata"]["uid"] == uid and pod["status"]["containerStatuses"][0]["restartCount"] == 0
    resize_calls = [c for c in fake.calls if c.subresource == "resize"]
    assert len(resize_calls) == 4 and all(c.verb == "patch" for c in resize_calls)


def test_resize_accepted_while_the_kubelet_is_silent(backend: KubernetesBackend, fake: FakeKube, make_mc) -> None:
    backend.create(make_mc())
    fake.run_controllers = lambda: None  # type: ignore[method-assign]  # the kubelet never reports
    result = backend.resize("demo", 1, "500m")
    assert result.outcome is ResizeOutcome.ACCEPTED


@pytest.mark.parametrize(("index", "cpu", "words"), [(9, "1", "no pod with index 9"), (1, "lots", "--cpu")])
def test_resize_bad_input(backend: KubernetesBackend, make_mc, index, cpu, words) -> None:
    backend.create(make_mc())
    with pytest.raises(InvalidRequestError, match=words):
        backend.resize("demo", index, cpu)


def test_exec_logs_list_and_delete(backend: KubernetesBackend, fake: FakeKube, make_mc) -> None:
    backend.create(make_mc())
    assert backend.exec("demo", 1, ["hostname"]).stdout == "demo-1\n"
    pod = fake.pods_of("demo")[0]["metadata"]["name"]
    fake.pod_logs[pod] = ["lead broker starting", "hello"]
    assert list(backend.logs("demo", 0)) == ["lead broker starting", "hello"]
    (summary,) = backend.list()
    assert (summary.name, summary.size, summary.ready, summary.state) == ("demo", 2, 2, "Ready")
    backend.delete("demo")
    assert fake.all_of(POD) == [] and fake.all_of(JOB) == []
    with pytest.raises(NotFoundError, match="'demo' not found in namespace 'hpc'"):
        backend.delete("demo")
    with pytest.raises(NotFoundError):
        backend.status("demo")


def test_missing_crd_is_named_with_the_fix(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    fake.crd_installed = False
    with pytest.raises(MissingAPIError, match="minicluster crd"):
        backend.create(make_mc())
    assert fake.writes() == []


def test_rbac_forbidden_is_reported(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    fake.forbidden.add(("patch", "jobs"))
    with pytest.raises(ForbiddenError, match=r"forbidden by RBAC.*jobs"):
        backend.create(make_mc())


def test_exec_forbidden_falls_back_to_pod_readiness(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    fake.forbidden.add(("exec", "pods/exec"))
    status = backend.create(make_mc())
    assert status.ranks_up is None and "forbidden" in (status.lead_error or "")


def test_unreachable_cluster_is_a_clear_error(tmp_path, monkeypatch) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: team}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(config))
    backend = get_backend("kubernetes")
    assert backend.namespace == "team"  # type: ignore[attr-defined]
    with pytest.raises(UnreachableError, match=r"cannot reach the Kubernetes API at https://127\.0\.0\.1:9"):
        backend.list()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(UnreachableError, match="no Kubernetes configuration"):
        get_backend("kubernetes")


def test_unknown_backend_names_the_available_ones() -> None:
    with pytest.raises(InvalidRequestError, match=r"'nope' is not available \(available: kubernetes, local, podman\)"):
        get_backend("nope")


def test_field_manager_is_ours(
    backend: KubernetesBackend, fake: FakeKube, make_mc, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, bool]] = []
    original = fake.apply

    def recorded(obj: Any, field_manager: str, force: bool = True) -> Any:
        calls.append((field_manager, force))
        return original(obj, field_manager, force)

    monkeypatch.setattr(fake, "apply", recorded)
    backend.create(make_mc())
    assert set(calls) == {(FIELD_MANAGER, True)}
