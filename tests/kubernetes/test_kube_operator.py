"""The operator against the fake API server: create, scale, resize status, delete, restart mid-reconcile,
conflicts, transient errors, invalid specs, the Flux Operator's kind."""

from __future__ import annotations

import pytest

from elasticity.control.ports import ResizeOutcome
from miniclusters.api.conversion import to_flux_operator
from miniclusters.api.status import ConditionJson
from miniclusters.backends.kubernetes.api import (
    CONFIG_MAP,
    FLUX_MINICLUSTER,
    JOB,
    MINICLUSTER,
    POD,
    SECRET,
    SERVICE,
    ApiError,
)
from miniclusters.backends.kubernetes.objects import custom_resource
from miniclusters.operator.controller import Controller
from miniclusters.operator.loop_types import ClusterKey
from miniclusters.testing.fake_kube import FakeKube
from tests.kubernetes.recorded_events import recorded_events

KEY = ClusterKey(MINICLUSTER.api_version, "hpc", "demo")


def _run(controller: Controller, clock) -> int:
    return controller.run_until_idle(advance=clock.advance)


def _conditions(fake: FakeKube) -> dict[str, tuple[str, str]]:
    status = fake.stored(MINICLUSTER, "demo")["status"]
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def _events(fake: FakeKube) -> list[tuple[str, str]]:
    return [(e["reason"], e["note"]) for e in recorded_events(fake)]


def test_creates_everything_once_and_reports_ready(fake: FakeKube, controller: Controller, clock, make_mc) -> None:
    fake.create(custom_resource(make_mc(size=3), "hpc"))
    controller.start()
    _run(controller, clock)
    for kind, name in ((SECRET, "demo-curve-cert"), (CONFIG_MAP, "demo-flux-config"), (SERVICE, "demo"), (JOB, "demo")):
        assert fake.stored(kind, name)["metadata"]["ownerReferences"][0]["kind"] == "MiniCluster"
    status = fake.stored(MINICLUSTER, "demo")["status"]
    assert status["size"] == 3 and status["readyPods"] == 3 and status["maximumSize"] == 6
    assert status["selector"] == "miniclusters.dev/name=demo" and status["observedGeneration"] == 1
    assert status["phase"] == "Running"  # the Phase column of `kubectl get miniclusters`
    assert _conditions(fake) == {
        "Ready": ("True", "AllPodsReady"),
        "Scaling": ("False", "AtSize"),
        "Resizing": ("False", "NoResize"),
        "InvalidSpec": ("False", "SpecValid"),
        "Degraded": ("False", "AsExpected"),
    }
    assert [r for r, _ in _events(fake)] == ["Created"] * 4
    writes = len(fake.writes())
    controller.queue.add(KEY)
    _run(controller, clock)
    assert len(fake.writes()) == writes, "a second reconcile of a settled cluster writes nothing"


def test_kubectl_scale_goes_through_the_scale_subresource(
    fake: FakeKube, controller: Controller, clock, make_mc
) -> None:
    fake.create(custom_resource(make_mc(), "hpc"))
    controller.start()
    _run(controller, clock)
    scale = fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"replicas": 5}}, subresource="scale")
    assert scale["status"] == {"replicas": 2, "selector": "miniclusters.dev/name=demo"}
    _run(controller, clock)
    job = fake.stored(JOB, "demo")["spec"]
    assert job["parallelism"] == job["completions"] == 5 and len(fake.pods_of("demo")) == 5
    assert fake.scale_of(fake.stored(MINICLUSTER, "demo"))["status"]["replicas"] == 5
    assert ("Scaled", "scaled Job from 2 to 5 pods (spec.size 5)") in _events(fake)
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"replicas": 1}}, subresource="scale")
    _run(controller, clock)
    assert sorted(fake.pods_of("demo")) == [0]


def test_scale_beyond_max_size_is_refused_by_the_api_server_and_changes_nothing(
    fake: FakeKube, controller: Controller, clock, make_mc
) -> None:
    """The CRD's CEL rule holds spec.size within maxSize on the scale subresource too (api/crd_rules.py): the
    write is refused (it used to be stored, and the operator marked the spec InvalidSpec)."""
    fake.create(custom_resource(make_mc(), "hpc"))
    controller.start()
    _run(controller, clock)
    with pytest.raises(ApiError) as refused:
        fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"replicas": 9}}, subresource="scale")
    assert refused.value.status == 422 and "spec.maxSize" in refused.value.message
    assert "maxSize (6) must not be smaller than size (9)" in refused.value.message
    _run(controller, clock)
    assert fake.stored(MINICLUSTER, "demo")["spec"]["size"] == 2
    assert _conditions(fake)["InvalidSpec"][0] == "False"
    assert fake.stored(JOB, "demo")["spec"]["parallelism"] == 2
    assert not [e for e in recorded_events(fake) if e["type"] == "Warning"]


def test_invalid_spec_creates_nothing(fake: FakeKube, controller: Controller, clock, make_mc) -> None:
    cr = custom_resource(make_mc(), "hpc")
    # past the CRD's rules (crd_coverage.py: a name used twice is found by comparing items), refused by validate
    cr["spec"]["containers"] = [{"image": "a:1", "runFlux": True, "name": "app"}, {"image": "b:1", "name": "app"}]
    fake.create(cr)
    controller.start()
    _run(controller, clock)
    assert _conditions(fake)["InvalidSpec"][0] == "True" and _conditions(fake)["Ready"] == ("False", "InvalidSpec")
    assert fake.stored(MINICLUSTER, "demo")["status"]["phase"] == "Invalid"
    assert fake.all_of(JOB) == [] and fake.all_of(SECRET) == []
    assert controller.queue.next_due() is None, "no crash loop: nothing left to retry"


def test_operator_restart_mid_reconcile_creates_no_duplicates(fake: FakeKube, clock, make_mc) -> None:
    fake.create(custom_resource(make_mc(), "hpc"))
    first = Controller(fake, namespace="hpc", clock=clock, wall=clock.wall)
    first.start()
    fake.fail("apply", 500, kind=JOB, count=1000)
    first.process_next()  # Secret, ConfigMap, Service applied; the Job failed: the operator "dies" here
    assert fake.all_of(JOB) == [] and len(fake.all_of(SECRET)) == 1
    cert = fake.stored(SECRET, "demo-curve-cert")["data"]
    fake.faults.clear()
    second = Controller(fake, namespace="hpc", clock=clock, wall=clock.wall)
    second.start()
    _run(second, clock)
    assert len(fake.all_of(JOB)) == len(fake.all_of(SECRET)) == len(fake.all_of(SERVICE)) == 1
    assert fake.stored(SECRET, "demo-curve-cert")["data"] == cert, "the certificate is not rotated"
    assert _conditions(fake)["Ready"][0] == "True"


def test_conflicting_status_update_is_retried_with_backoff(
    fake: FakeKube, controller: Controller, clock, make_mc
) -> None:
    fake.create(custom_resource(make_mc(), "hpc"))
    controller.start()
    key = controller.queue.pop()
    assert key == KEY
    controller.queue.done(key)
    controller.queue.add(key)
    # A user edits the MiniCluster while the operator is between reading it and writing its status.
    for _ in range(4):
        fake.before_next_write(lambda api: None)
    original_replace = fake.replace

    def racing_replace(obj, subresource=None):
        if subresource == "status" and not getattr(racing_replace, "raced", False):
            racing_replace.raced = True  # type: ignore[attr-defined]
            fake.patch(MINICLUSTER, "hpc", "demo", {"metadata": {"labels": {"edited": "yes"}}})
        return original_replace(obj, subresource)

    fake.replace = racing_replace  # type: ignore[method-assign]
    assert controller.process_next()
    assert controller.queue.failures(KEY) == 1 and controller.queue.next_due() == pytest.approx(clock() + 0.05)
    _run(controller, clock)
    cr = fake.stored(MINICLUSTER, "demo")
    assert cr["metadata"]["labels"]["edited"] == "yes" and cr["status"]["readyPods"] == 2
    assert controller.queue.failures(KEY) == 0


def test_throttling_and_server_errors_back_off_exponentially(
    fake: FakeKube, controller: Controller, clock, make_mc
) -> None:
    fake.create(custom_resource(make_mc(), "hpc"))
    controller.start()
    fake.fail("get", 429, kind=MINICLUSTER, count=3)
    fake.fail("get", 503, kind=MINICLUSTER, count=1)
    start = clock()
    _run(controller, clock)
    assert clock() - start == pytest.approx(0.05 + 0.1 + 0.2 + 0.4)
    assert _conditions(fake)["Ready"][0] == "True"


def test_resizing_condition_reports_deferred_and_infeasible(
    fake: FakeKube, controller: Controller, backend, clock, make_mc
) -> None:
    fake.create(custom_resource(make_mc(), "hpc"))
    controller.start()
    _run(controller, clock)
    # More than the node holds: the apiserver refuses the resize itself (as the real one does), nothing changes
    assert backend.resize("demo", 1, "64").outcome is ResizeOutcome.INFEASIBLE
    _run(controller, clock)
    assert _conditions(fake)["Resizing"] == ("False", "NoResize")
    fake.kubelet = "infeasible"  # what the kubelet itself may still say (PodResizePending, reason Infeasible)
    backend.resize("demo", 1, "2")
    _run(controller, clock)
    assert _conditions(fake)["Resizing"] == ("True", "Infeasible")
    fake.kubelet = "auto"
    backend.resize("demo", 1, "500m")
    _run(controller, clock)
    assert _conditions(fake)["Resizing"] == ("False", "NoResize")


def test_template_change_is_degraded_not_recreated(fake: FakeKube, controller: Controller, clock, make_mc) -> None:
    fake.create(custom_resource(make_mc(), "hpc"))
    controller.start()
    _run(controller, clock)
    uid = fake.stored(JOB, "demo")["metadata"]["uid"]
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"containers": [{"image": "app:2"}]}})
    _run(controller, clock)
    assert _conditions(fake)["Degraded"] == ("True", "PodTemplateImmutable")
    assert fake.stored(JOB, "demo")["metadata"]["uid"] == uid


def test_delete_cascades_and_cleanup_deletes_finished_clusters(
    fake: FakeKube, controller: Controller, clock, make_mc
) -> None:
    fake.create(custom_resource(make_mc(cleanup=True, interactive=False), "hpc"))
    controller.start()
    _run(controller, clock)
    fake.finish_pod("demo", 0, exit_code=0)
    _run(controller, clock)
    assert fake.all_of(MINICLUSTER) == [] and fake.all_of(JOB) == [] and fake.all_of(POD) == []
    assert ("Deleted", "the lead broker finished and spec.cleanup is set") in _events(fake)


def test_failed_job_is_degraded(fake: FakeKube, controller: Controller, clock, make_mc) -> None:
    fake.create(custom_resource(make_mc(interactive=False), "hpc"))
    controller.start()
    _run(controller, clock)
    fake.finish_pod("demo", 1, exit_code=3)
    _run(controller, clock)
    assert _conditions(fake)["Degraded"] == ("True", "PodsFailed")


def test_watch_expiry_relists(fake: FakeKube, controller: Controller, clock, make_mc) -> None:
    controller.start()
    fake.create(custom_resource(make_mc(), "hpc"))
    fake.compact()
    _run(controller, clock)
    assert len(fake.all_of(JOB)) == 1


def test_flux_operator_kind_is_converted(fake: FakeKube, clock, make_mc) -> None:
    fake.flux_crd_installed = True
    flux = to_flux_operator(make_mc())  # open JSON: the Flux Operator's document, an object of its own kind
    flux["metadata"]["namespace"] = "hpc"
    fake.create(
        {"apiVersion": flux["apiVersion"], "kind": flux["kind"], "metadata": flux["metadata"], "spec": flux["spec"]}
    )
    controller = Controller(fake, namespace="hpc", accept_flux_kind=True, clock=clock, wall=clock.wall)
    controller.start()
    _run(controller, clock)
    (ref,) = fake.stored(JOB, "demo")["metadata"]["ownerReferences"]
    assert ref["apiVersion"] == FLUX_MINICLUSTER.api_version
    assert fake.stored(FLUX_MINICLUSTER, "demo")["status"]["readyPods"] == 2


def test_everything_the_operator_sent_passed_the_schemas(fake: FakeKube, controller: Controller, clock, make_mc):
    """The fake validates every object it receives (kubernetes-validate 1.37, strict; our CRD schema)."""
    assert fake.validate
    fake.create(custom_resource(make_mc(), "hpc"))
    controller.start()
    _run(controller, clock)
    kinds = {c.kind for c in fake.writes()}
    assert {"Secret", "ConfigMap", "Service", "Job", "Event", "MiniCluster"} <= kinds
    assert fake.warnings == [], "no unknown field (the real server would drop it with a warning)"


def test_scaling_without_max_size_keeps_the_ceiling_it_was_created_with(
    fake: FakeKube, controller: Controller, clock, spec_data
) -> None:
    from miniclusters.api import load_minicluster

    spec_data["spec"].pop("maxSize")
    spec_data["spec"]["size"] = 3
    fake.create(custom_resource(load_minicluster(spec_data), "hpc"))
    controller.start()
    _run(controller, clock)
    config = fake.stored(CONFIG_MAP, "demo-flux-config")["data"]["broker.toml"]
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"replicas": 1}}, subresource="scale")  # an HPA scales down
    _run(controller, clock)
    broker_toml = fake.stored(CONFIG_MAP, "demo-flux-config")["data"]["broker.toml"]
    assert broker_toml == config and "demo-[0-2]" in config, "the broker config keeps its 3 hosts"
    assert fake.stored(MINICLUSTER, "demo")["status"]["maximumSize"] == 3
    assert _conditions(fake)["Degraded"] == ("False", "AsExpected")
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"replicas": 3}}, subresource="scale")  # and up again
    _run(controller, clock)
    assert sorted(fake.pods_of("demo")) == [0, 1, 2] and _conditions(fake)["InvalidSpec"][0] == "False"
    fake.patch(MINICLUSTER, "hpc", "demo", {"spec": {"replicas": 4}}, subresource="scale")  # beyond the hosts
    _run(controller, clock)
    assert _conditions(fake)["InvalidSpec"] == ("True", "SpecRejected")
    assert fake.stored(JOB, "demo")["spec"]["parallelism"] == 3


def test_the_phase_column_summarises_the_conditions() -> None:
    from miniclusters.operator.reconcile import phase_of

    def conditions(ready: tuple[str, str], scaling: str = "False") -> list[ConditionJson]:
        def condition(kind: str, status: str, reason: str) -> ConditionJson:
            return {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }

        return [condition("Ready", *ready), condition("Scaling", scaling, "x")]

    assert phase_of(conditions(("False", "Completed")), 0) == "Completed"
    assert phase_of(conditions(("False", "Failed")), 2) == "Failed"
    assert phase_of(conditions(("True", "AllPodsReady")), 4) == "Running"
    assert phase_of(conditions(("False", "PodsNotReady"), "True"), 0) == "Pending"
    assert phase_of(conditions(("False", "PodsNotReady"), "True"), 2) == "Scaling"
    assert phase_of(conditions(("False", "PodsNotReady")), 3) == "NotReady"


def test_rbac_missing_a_verb_is_named_in_an_event_and_the_log(
    fake: FakeKube, controller: Controller, clock, make_mc, caplog: pytest.LogCaptureFixture
) -> None:
    """The ClusterRole lost `patch` on jobs (server-side apply is a patch): the operator says so, once as an Event
    and at every retry in its log, and applies the Job as soon as the verb is granted again."""
    fake.forbidden.add(("patch", "jobs"))
    fake.create(custom_resource(make_mc(size=2), "hpc"))
    controller.start()
    with pytest.raises(RuntimeError, match="not idle"):  # it keeps retrying (with back-off) while refused
        controller.run_until_idle(advance=clock.advance, max_steps=6)
    forbidden = [note for reason, note in _events(fake) if reason == "Forbidden"]
    assert len(forbidden) == 1, _events(fake)
    assert (
        "may not patch jobs.batch in namespace hpc" in forbidden[0]
        and "ClusterRole miniclusters-operator" in (forbidden[0])
    )
    assert "kubectl auth can-i patch jobs.batch --as=system:serviceaccount:test:client -n hpc" in forbidden[0]
    logged = [r.getMessage() for r in caplog.records if "RBAC:" in r.getMessage()]
    assert len(logged) >= 2 and all("may not patch jobs.batch" in line for line in logged)
    assert not fake.all_of(JOB)
    fake.forbidden.clear()
    _run(controller, clock)
    assert fake.stored(JOB, "demo")["spec"]["parallelism"] == 2


def test_a_refusal_is_read_back_as_verb_resource_and_place() -> None:
    from miniclusters.operator.forbidden import refused_verb

    cluster = refused_verb(
        'customresourcedefinitions.apiextensions.k8s.io "x" is forbidden: User "system:serviceaccount:a:b" cannot '
        'get resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope'
    )
    assert cluster is not None and cluster.qualified == "customresourcedefinitions.apiextensions.k8s.io"
    assert cluster.namespace is None and cluster.verb == "get"
    exec_ = refused_verb(
        'pods "demo-0" is forbidden: User "u" cannot create resource "pods/exec" in API group "" in the namespace "hpc"'
    )
    assert exec_ is not None and exec_.qualified == "pods/exec" and exec_.namespace == "hpc"
    assert refused_verb("admission webhook denied the request") is None
