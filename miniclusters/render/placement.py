"""spec.placement applied: the shape the policy chooses, as an ordinary spec, and the scheduling rules it needs.

`shape_for_placement` turns a spec with a placement policy into the spec the rest of the product already knows
how to run: `size` becomes the workers (pods), the broker container's requests become one worker's share of the
job's totals (Algorithm 2), and `placement.groups` carries the task groups. Its policy is then `none`, so shaping
twice changes nothing. An Indexed Job has one pod template, so every pod requests what the largest worker needs
(the round-robin layout makes the workers equal when the ranks divide evenly).
"""

from __future__ import annotations

from elasticity.model.resources import cpu_millicores, format_millicores, parse_quantity
from elasticity.policy.placement import (
    CommunicationProfile,
    Granularity,
    mpi_aware_layout,
    profile_class,
    select_granularity,
)
from miniclusters.api.quantity import Quantity
from miniclusters.api.spec import MiniCluster, ResourceRequirements
from miniclusters.kube_shapes import PodAffinityTerm, TaskGroupRules
from miniclusters.kube_shapes import ResourceRequirements as ContainerResources
from miniclusters.render.layout import selector_labels

HOSTNAME_KEY = "kubernetes.io/hostname"
CORE_MILLI = 1000


def placement_granularity(mc: MiniCluster, measured: CommunicationProfile | None = None) -> Granularity:
    """Algorithm 1 for this spec: `tasks` ranks on at most `size` nodes."""
    spec = mc.spec
    placement = spec.placement
    return select_granularity(
        spec.tasks,
        profile_class(placement.profile, measured),
        placement.policy,
        spec.size,
        workers_given=spec.size if placement.policy == "none" else None,
    )


def _job_totals(mc: MiniCluster) -> tuple[int, int]:
    """The job's CPU (millicores) and memory (bytes): the user's per-pod requests times size; CPU defaults to a
    core per rank (an MPI rank keeps one busy), memory to none."""
    spec = mc.spec
    requests = spec.containers[spec.flux_runner_index].resources.requests
    cpu = cpu_millicores(requests["cpu"]) * spec.size if "cpu" in requests else spec.tasks * CORE_MILLI
    memory = int(parse_quantity(requests["memory"])) * spec.size if "memory" in requests else 0
    return cpu, memory


def _bytes_quantity(value: int) -> str:
    """Bytes as the largest binary suffix that divides them (2Gi, 512Mi), else plain bytes."""
    for suffix, unit in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if value and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def _guaranteed(resources: ResourceRequirements) -> ResourceRequirements:
    requests = dict(resources.requests)
    return resources.model_copy(update={"requests": requests, "limits": {**resources.limits, **requests}})


def shape_for_placement(mc: MiniCluster, measured: CommunicationProfile | None = None) -> MiniCluster:
    """The spec as the placement policy (and exclusive CPUs) shape it; unchanged when neither is asked for."""
    spec = mc.spec
    placement = spec.placement
    if placement.policy == "none" and placement.cpus == "shared":
        return mc
    runner_index = spec.flux_runner_index
    runner = spec.containers[runner_index]
    requests: dict[str, Quantity] = dict(runner.resources.requests)
    size, groups = spec.size, placement.groups
    if placement.policy != "none":
        shape = placement_granularity(mc, measured)
        cpu_total, memory_total = _job_totals(mc)
        workers = mpi_aware_layout(spec.tasks, shape.workers, cpu_total, memory_total).workers
        # one pod template: every pod asks what the largest worker needs (rounding may favour any worker by a unit)
        requests["cpu"] = format_millicores(max(w.cpu_milli for w in workers))
        if memory_total:
            requests["memory"] = _bytes_quantity(max(w.memory_bytes for w in workers))
        size, groups = shape.workers, shape.groups
    if placement.cpus == "exclusive":
        given = requests.get("cpu")
        milli = cpu_millicores(given) if given is not None else -(-spec.tasks // size) * CORE_MILLI
        requests["cpu"] = str(max(1, -(-milli // CORE_MILLI)))
    resources = runner.resources.model_copy(update={"requests": requests})
    if placement.cpus == "exclusive":
        resources = _guaranteed(resources)
    containers = list(spec.containers)
    containers[runner_index] = runner.model_copy(update={"resources": resources})
    if placement.cpus == "exclusive":
        containers = [
            c if i == runner_index else c.model_copy(update={"resources": _guaranteed(c.resources)})
            for i, c in enumerate(containers)
        ]
    services = [s.model_copy(update={"resources": _guaranteed(s.resources)}) for s in spec.services]
    if placement.cpus != "exclusive":
        services = list(spec.services)
    shaped = spec.model_copy(
        update={
            "size": size,
            "max_size": 0,
            "containers": containers,
            "services": services,
            "placement": placement.model_copy(update={"policy": "none", "groups": groups}),
        }
    )
    return mc.model_copy(update={"spec": shaped})


def exclusive_cores_per_pod(mc: MiniCluster) -> int:
    """Whole cores each pod of a shaped exclusive spec holds."""
    runner = mc.spec.containers[mc.spec.flux_runner_index]
    milli = cpu_millicores(runner.resources.requests.get("cpu", "1"))
    return max(1, -(-milli // CORE_MILLI))


INIT_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
"""What an init container requests (and is limited to) when the pod must be Guaranteed."""


def guaranteed_init_resources(given: ResourceRequirements | None = None) -> ContainerResources:
    """Init containers count for the QoS class too: requests equal limits, the given ones or a small default."""
    requests = {k: str(v) for k, v in (given.requests if given else {}).items()} or dict(INIT_RESOURCES)
    return {"requests": requests, "limits": dict(requests)}


def task_group_rules(mc: MiniCluster) -> TaskGroupRules:
    """Pod-spec fields for a shaped spec's task groups: empty without groups.

    One group: required pod affinity to the MiniCluster's own pods (all on one node). Several: at most
    ceil(pods/groups) of them on any node (a topology spread whose skew is counted from empty nodes, so
    groups never share a node) and a preference for nodes already holding them (each group fills its node).
    The default one-pod-per-node anti-affinity is dropped: it contradicts both."""
    groups, pods = mc.spec.placement.groups, mc.spec.size
    if groups < 1 or pods < 2:
        return {}
    own: PodAffinityTerm = {"labelSelector": {"matchLabels": selector_labels(mc)}, "topologyKey": HOSTNAME_KEY}
    if groups == 1:
        return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own]}}}
    per_group = -(-pods // groups)
    return {
        "affinity": {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": own}]
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": per_group,
                "minDomains": groups,
                "topologyKey": HOSTNAME_KEY,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": selector_labels(mc)},
            }
        ],
    }


def placement_summary(mc: MiniCluster) -> str:
    """One line saying what spec.placement makes of the spec (empty when it asks for nothing)."""
    placement = mc.spec.placement
    if placement.policy == "none" and placement.cpus == "shared" and not placement.groups:
        return ""
    shaped = shape_for_placement(mc)
    runner = shaped.spec.containers[shaped.spec.flux_runner_index].resources
    requests = ", ".join(f"{k} {v}" for k, v in runner.requests.items()) or "no requests"
    groups = shaped.spec.placement.groups
    return (
        f"{placement.policy} ({placement.profile}): {shaped.spec.tasks} ranks in {shaped.spec.size} pod(s) of "
        f"{requests}; {groups or 'no'} task group(s); CPUs {placement.cpus}"
        + (" (limits = requests, Guaranteed)" if placement.cpus == "exclusive" else "")
    )


__all__ = [
    "exclusive_cores_per_pod",
    "placement_granularity",
    "placement_summary",
    "shape_for_placement",
    "task_group_rules",
]
