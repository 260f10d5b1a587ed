"""spec.placement: validated with field paths, rendered into rules the schema and the fake API server accept."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from elasticity.model.resources import cpu_millicores, parse_quantity
from miniclusters.api import SpecError, load_minicluster
from miniclusters.backends.kubernetes.api import JOB
from miniclusters.backends.kubernetes.objects import custom_resource, desired_objects
from miniclusters.cli import main
from miniclusters.kube_shapes import KubeObject
from miniclusters.multiplex.settings import multiplex_config
from miniclusters.render import RenderOptions, render_minicluster
from miniclusters.render.entrypoint import render_entrypoint, submit_words
from miniclusters.render.placement import placement_granularity, shape_for_placement
from miniclusters.testing.fake_kube import FakeKube

BASE: dict[str, Any] = {
    "apiVersion": "miniclusters.dev/v1alpha1",
    "kind": "MiniCluster",
    "metadata": {"name": "placed", "namespace": "hpc"},
    "spec": {
        "size": 4,
        "tasks": 16,
        "containers": [{"image": "app:1", "command": "./kernel", "resources": {"requests": {"memory": "2Gi"}}}],
    },
}


def _spec(**placement: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["spec"]["placement"] = placement
    return data


def _job(data: dict[str, Any]) -> KubeObject:
    objects = render_minicluster(load_minicluster(data))
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    return next(o for o in objects if o["kind"] == "Job")


def test_granularity_renders_one_pod_per_rank_in_four_task_groups() -> None:
    job = _job(_spec(profile="memory", policy="granularity"))
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 16
    pod = job["spec"]["template"]["spec"]
    # each worker's share of the job's totals: a core per rank, 4 x 2Gi memory over 16 ranks
    assert pod["containers"][0]["resources"] == {"requests": {"memory": "512Mi", "cpu": "1"}}
    assert "podAntiAffinity" not in pod["affinity"]
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["maxSkew"] == 4 and spread["minDomains"] == 4 and spread["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread["labelSelector"] == {"matchLabels": {"miniclusters.dev/name": "placed"}}
    term = pod["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    # the entrypoint spreads the ranks over the workers
    config = render_minicluster(load_minicluster(_spec(profile="memory", policy="granularity")))[1]
    assert "-N 16 -n 16" in config["data"]["entrypoint.sh"]


def test_scale_renders_one_pod_per_node_with_four_ranks_each() -> None:
    job = _job(_spec(profile="cpu", policy="scale"))
    assert job["spec"]["completions"] == 4
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["requests"] == {"memory": "2Gi", "cpu": "4"}
    assert pod["topologySpreadConstraints"][0]["maxSkew"] == 1


def test_network_job_stays_in_one_pod_with_the_whole_request() -> None:
    job = _job(_spec(profile="network", policy="granularity"))
    assert job["spec"]["completions"] == 1
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"memory": "8Gi", "cpu": "16"}


def test_no_policy_keeps_the_shape_and_the_default_anti_affinity() -> None:
    job = _job(_spec())
    assert job["spec"]["completions"] == 4
    assert "podAntiAffinity" in job["spec"]["template"]["spec"]["affinity"]
    assert "topologySpreadConstraints" not in job["spec"]["template"]["spec"]


def test_user_groups_of_one_pack_every_pod_on_one_node() -> None:
    job = _job(_spec(groups=1))
    required = job["spec"]["template"]["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert required[0]["topologyKey"] == "kubernetes.io/hostname"


def test_shaping_is_idempotent() -> None:
    mc = load_minicluster(_spec(profile="cpu", policy="granularity", cpus="exclusive"))
    once = shape_for_placement(mc)
    assert shape_for_placement(once) == once
    assert load_minicluster(once.to_dict()) == once  # the shaped spec is itself valid


def test_exclusive_flux_flavour_pods_keep_open_mpis_busy_polling() -> None:
    """Exclusive pods own their cores (the kubelet's static CPU manager) and their ranks are bound one to a core
    (`cpu-affinity=per-task`), so the yield that shared cores need would only add latency."""
    data = _spec(profile="cpu", policy="scale", cpus="exclusive")
    data["spec"]["flux"] = {"flavour": "flux"}
    env = _job(data)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "OMPI_MCA_mpi_yield_when_idle" not in {e["name"] for e in env}
    shared = _spec(profile="cpu", policy="scale")
    shared["spec"]["flux"] = {"flavour": "flux"}
    env = _job(shared)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "OMPI_MCA_mpi_yield_when_idle", "value": "1"} in env


def test_exclusive_pods_are_guaranteed_with_integer_cpu_in_the_fake_api_server() -> None:
    mc = load_minicluster(_spec(profile="cpu", policy="scale", cpus="exclusive"))
    fake = FakeKube(namespace="hpc")
    owner = fake.create(custom_resource(mc, "hpc"))
    for obj in desired_objects(mc, "hpc", owner, RenderOptions()):
        fake.apply(obj, field_manager="miniclusters")
    job = fake.stored(JOB, "placed")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"memory": "2Gi", "cpu": "4"}
    pods = fake.pods_of("placed")
    assert sorted(pods) == [0, 1, 2, 3]
    assert {p["status"]["qosClass"] for p in pods.values()} == {"Guaranteed"}


def test_shared_pods_are_not_guaranteed() -> None:
    mc = load_minicluster(_spec(profile="cpu", policy="scale"))
    fake = FakeKube(namespace="hpc")
    owner = fake.create(custom_resource(mc, "hpc"))
    for obj in desired_objects(mc, "hpc", owner, RenderOptions()):
        fake.apply(obj, field_manager="miniclusters")
    assert {p["status"]["qosClass"] for p in fake.pods_of("placed").values()} == {"Burstable"}


def test_exclusive_pods_bind_each_rank_to_a_core_of_its_own() -> None:
    """The built-in broker of an exclusive pod defaults to cpu-affinity=per-task; flux-core gets the option on the
    spec's command (the user's own cpu-affinity flag wins); shared pods get neither."""
    builtin = render_entrypoint(load_minicluster(_spec(cpus="exclusive")))
    assert "-Sjob-exec.cpu-affinity=per-task" in builtin and "cpu-affinity=per-task" not in submit_words(
        load_minicluster(_spec(cpus="exclusive"))
    )
    flux = _spec(cpus="exclusive")
    flux["spec"]["flux"] = {"flavour": "flux"}
    assert submit_words(load_minicluster(flux))[-2:] == ["-o", "cpu-affinity=per-task"]
    assert "job-exec.cpu-affinity" not in render_entrypoint(load_minicluster(flux))
    flux["spec"]["flux"]["optionFlags"] = "-o cpu-affinity=on"
    assert "cpu-affinity=per-task" not in submit_words(load_minicluster(flux))
    shared = load_minicluster(_spec())
    assert "cpu-affinity" not in render_entrypoint(shared) and "cpu-affinity" not in " ".join(submit_words(shared))


@pytest.mark.parametrize(
    ("change", "path", "fragment"),
    [
        ({"tasks": 3, "placement": {"policy": "granularity"}}, "spec.placement.policy", "tasks (3) is below size (4"),
        (
            {"placement": {"cpus": "exclusive"}, "interactive": True,
             "multiplexing": {"enabled": True, "command": "proxy_solver"}},
            "spec.placement.cpus",
            "multiplexing",
        ),
        ({"placement": {"policy": "scale"}, "maxSize": 8}, "spec.placement.policy", "maxSize"),
        ({"placement": {"policy": "fine"}}, "spec.placement.policy", "none"),
        ({"placement": {"profile": "gpu"}}, "spec.placement.profile", "network"),
        ({"placement": {"cpus": "pinned"}}, "spec.placement.cpus", "exclusive"),
        ({"placement": {"groups": 5}}, "spec.placement.groups", "5 task groups for 4 pod(s)"),
        ({"placement": {"policy": "scale", "groups": 2}}, "spec.placement.groups", "set by the 'scale' policy"),
    ],
)  # fmt: skip
def test_contradictions_are_rejected_naming_the_field(
    tmp_path: Path, change: dict[str, Any], path: str, fragment: str
) -> None:
    data = copy.deepcopy(BASE)
    data["spec"].update(change)
    if "interactive" in change:
        data["spec"]["containers"][0]["command"] = ""
    with pytest.raises(SpecError) as caught:
        load_minicluster(data)
    assert any(p.path == path and fragment in p.message for p in caught.value.problems), caught.value.problems
    spec_file = tmp_path / "bad.yaml"
    spec_file.write_text(yaml.safe_dump(data))
    for verb in ("validate", "render"):
        result = CliRunner().invoke(main, [verb, str(spec_file)])
        assert result.exit_code == 2, result.output
        assert path in result.stderr and result.stdout == ""


def test_exclusive_needs_memory_and_whole_cores() -> None:
    data = _spec(cpus="exclusive")
    data["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1500m"}}
    with pytest.raises(SpecError) as caught:
        load_minicluster(data)
    paths = {p.path for p in caught.value.problems}
    assert {"spec.containers[0].resources.requests.memory", "spec.containers[0].resources.requests.cpu"} <= paths


def test_the_multiplexing_controller_refuses_exclusive_pods() -> None:
    from miniclusters.backends.base import ClusterStatus, PodStatus

    status = ClusterStatus("placed", "hpc", 2, 2, 2, pods=(PodStatus(0, "placed-0", "Running"),))
    with pytest.raises(ValueError, match=r"spec\.placement\.cpus is exclusive.*pinning forbids"):
        multiplex_config(status, {"placementCpus": "exclusive"}, 4, 2000)


def test_validate_says_what_the_placement_makes_of_the_spec(tmp_path: Path) -> None:
    spec_file = tmp_path / "placed.yaml"
    spec_file.write_text(yaml.safe_dump(_spec(profile="memory", policy="granularity", cpus="exclusive")))
    result = CliRunner().invoke(main, ["validate", str(spec_file)])
    assert result.exit_code == 0, result.output
    assert "placement: granularity (memory): 16 ranks in 16 pod(s) of memory 512Mi, cpu 1; 4 task group(s)" in (
        result.stdout
    )


@pytest.mark.parametrize(
    ("placement", "pods"),
    [
        ({"profile": "memory", "policy": "granularity", "cpus": "exclusive"}, 16),
        ({"profile": "network", "policy": "scale"}, 1),
        ({"groups": 1}, 4),
        ({"groups": 2, "cpus": "exclusive"}, 4),
    ],
)
def test_the_fake_api_server_accepts_every_placement_rule(placement: dict[str, Any], pods: int) -> None:
    mc = load_minicluster(_spec(**placement))
    fake = FakeKube(namespace="hpc")
    owner = fake.create(custom_resource(mc, "hpc"))
    for obj in desired_objects(mc, "hpc", owner, RenderOptions()):
        fake.apply(obj, field_manager="miniclusters")  # schema-checked (kubernetes-validate 1.33) by the fake
    assert len(fake.pods_of("placed")) == pods


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 12),
    tasks=st.integers(1, 48),
    profile=st.sampled_from(["cpu", "memory", "network"]),
    policy=st.sampled_from(["none", "scale", "granularity"]),
    cpus=st.sampled_from(["shared", "exclusive"]),
)
def test_shaped_specs_are_valid_idempotent_and_cover_the_job(
    size: int, tasks: int, profile: str, policy: str, cpus: str
) -> None:
    assume(policy != "granularity" or tasks >= size)
    data = _spec(profile=profile, policy=policy, cpus=cpus)
    data["spec"].update({"size": size, "tasks": tasks})
    mc = load_minicluster(data)
    shaped = shape_for_placement(mc)
    assert shape_for_placement(shaped) == shaped
    assert load_minicluster(shaped.to_dict()) == shaped
    requests = shaped.spec.containers[0].resources.requests
    if policy != "none":
        assert shaped.spec.size == placement_granularity(mc).workers
        assert cpu_millicores(requests["cpu"]) * shaped.spec.size >= tasks * 1000  # a core per rank, at least
        assert parse_quantity(requests["memory"]) * shaped.spec.size >= parse_quantity("2Gi") * size
    if cpus == "exclusive":
        assert shaped.spec.containers[0].resources.limits == requests
        assert cpu_millicores(requests["cpu"]) % 1000 == 0
