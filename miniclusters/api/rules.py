"""Cross-field rules: the Flux Operator's (api/v1alpha2 Validate) plus ours.

Each rule is a small pure function over a type-checked MiniCluster returning the problems it finds, so
a spec with many mistakes gets them all reported at once, each with its field path.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING

from broker.curve_cert import CurveCertError, parse_zcert
from broker.fsd import parse_fsd
from miniclusters.api.burst_rules import bursting_problems
from miniclusters.api.errors import Problem, join_path
from miniclusters.api.hosts import registry_for
from miniclusters.api.names import (
    ENV_VAR_NAME,
    MPI_CALL,
    dns1123_label_error,
    is_blank,
    label_key_error,
    label_value_error,
)
from miniclusters.api.quantity import parse_quantity
from miniclusters.api.run_rules import RUN_RULES

if TYPE_CHECKING:
    from miniclusters.api.spec import Container, MiniCluster, ResourceRequirements

# Names our renderer gives to containers and volumes it adds; user names must not collide.
RESERVED_CONTAINER_NAMES = frozenset({"miniclusters-broker", "flux-view"})
RESERVED_VOLUME_NAMES = frozenset({"mc-config", "mc-curve-cert", "mc-broker", "mc-flux-view", "mc-run", "mc-archive"})
TOPOLOGY = re.compile(r"^(kary:[1-9][0-9]*|binomial|mincrit(:[1-9][0-9]*)?|custom)$")
BUILTIN_QUEUE_POLICIES = ("", "fcfs", "easy")

Rule = Callable[["MiniCluster"], Iterator[Problem]]


def _names(mc: MiniCluster) -> Iterator[Problem]:
    name = mc.metadata.name
    error = dns1123_label_error(name)
    if error:
        yield Problem("metadata.name", error)
    else:
        last_host = registry_for(mc).pod_hostnames()[-1]
        if len(last_host) > 63:
            yield Problem(
                "metadata.name",
                f"pod hostnames reach {last_host!r} ({len(last_host)} characters); "
                "a hostname must be a DNS-1123 label of at most 63 characters",
            )
    error = dns1123_label_error(mc.metadata.namespace)
    if error:
        yield Problem("metadata.namespace", error)
    if mc.spec.network.headless_name:
        error = dns1123_label_error(mc.spec.network.headless_name)
        if error:
            yield Problem("spec.network.headlessName", error)


def _sizes(mc: MiniCluster) -> Iterator[Problem]:
    spec = mc.spec  # minSize first: against an explicit maxSize it needs no size (which may have been refused)
    if spec.min_size:
        if spec.min_size > spec.effective_max_size:
            yield Problem(
                "spec.minSize",
                f"minSize ({spec.min_size}) must not exceed maxSize ({spec.effective_max_size})",
            )
        elif spec.min_size > spec.size:
            yield Problem("spec.minSize", f"minSize ({spec.min_size}) must not exceed size ({spec.size})")
    if spec.max_size and spec.max_size < spec.size:
        yield Problem("spec.maxSize", f"maxSize ({spec.max_size}) must not be smaller than size ({spec.size})")
    if spec.autoscale.enabled and spec.effective_max_size <= max(1, spec.min_size):
        yield Problem(
            "spec.autoscale.enabled",
            f"nothing to scale: maxSize ({spec.effective_max_size}) must exceed max(1, minSize) to autoscale",
        )


def _containers(mc: MiniCluster) -> Iterator[Problem]:
    containers = mc.spec.containers
    runners = [i for i, c in enumerate(containers) if c.run_flux]
    if len(containers) > 1 and len(runners) != 1:
        yield Problem(
            "spec.containers",
            f"exactly one container must set runFlux: true when there are several ({len(runners)} do)",
        )
    seen: dict[str, str] = {}
    for group, items in (("containers", containers), ("services", mc.spec.services)):
        for index, container in enumerate(items):
            path = join_path("spec", group, index)
            runs_flux = group == "containers" and (container.run_flux or len(containers) == 1)
            yield from _container(container, path, runs_flux, is_service=group == "services")
            if container.name:
                if container.name in seen:
                    yield Problem(f"{path}.name", f"{container.name!r} is already used by {seen[container.name]}")
                seen[container.name] = path


def _container(container: Container, path: str, runs_flux: bool, is_service: bool) -> Iterator[Problem]:
    if not container.name and is_service:
        yield Problem(f"{path}.name", "a service container needs a name")
    elif not container.name and not runs_flux:
        yield Problem(f"{path}.name", "a container that does not run Flux needs a name")
    if container.name:
        error = dns1123_label_error(container.name)
        if error:
            yield Problem(f"{path}.name", error)
        elif container.name in RESERVED_CONTAINER_NAMES:
            yield Problem(f"{path}.name", f"{container.name!r} is reserved for the container miniclusters adds")
    if container.launcher and container.batch:
        yield Problem(f"{path}.batch", "launcher and batch cannot both be set; choose one")
    if container.command and is_blank(container.command):
        yield Problem(f"{path}.command", "only spaces: give a command, or leave it out (interactive: true)")
    if runs_flux and container.commands.script and container.command:
        yield Problem(f"{path}.commands.script", "a script and a command cannot both be given; choose one")
    if is_service and (container.commands.pre or container.commands.broker_pre or container.commands.worker_pre):
        yield Problem(f"{path}.commands", "service containers do not support pre, brokerPre or workerPre")
    for key in [*container.environment, *container.secrets]:
        if not ENV_VAR_NAME.fullmatch(key):
            yield Problem(f"{path}.environment.{key}", f"{key!r} is not a valid environment variable name")
    yield from _container_volumes(container, path)
    yield from _resources(container.resources, f"{path}.resources")


def _container_volumes(container: Container, path: str) -> Iterator[Problem]:
    """A container's volumes: DNS-label names not ours, the paths each source needs, a valid size limit."""
    for name, volume in container.volumes.items():
        vpath = f"{path}.volumes.{name}"
        error = dns1123_label_error(name)
        if error:
            yield Problem(vpath, f"volume name {error}")
        elif name in RESERVED_VOLUME_NAMES:
            yield Problem(vpath, f"volume name {name!r} is reserved for miniclusters")
        if volume.secret_name or volume.config_map_name:
            pass
        elif volume.claim_name and not volume.path:
            yield Problem(f"{vpath}.path", f"volume with claimName {volume.claim_name!r} needs a path")
        elif volume.host_path and not volume.path:
            yield Problem(f"{vpath}.path", f"volume with hostPath {volume.host_path!r} needs a path")
        if volume.path and not volume.path.startswith("/"):
            yield Problem(f"{vpath}.path", f"{volume.path!r} must be an absolute path")
        if volume.empty_dir_size_limit:
            try:
                parse_quantity(volume.empty_dir_size_limit)
            except ValueError as exc:
                yield Problem(f"{vpath}.emptyDirSizeLimit", str(exc))


def _resources(resources: ResourceRequirements, path: str) -> Iterator[Problem]:
    for name, limit in resources.limits.items():
        request = resources.requests.get(name)
        if request is not None and parse_quantity(request) > parse_quantity(limit):
            yield Problem(
                f"{path}.requests.{name}",
                f"request {request!r} is larger than the limit {limit!r}",
            )


def _volumes_agree(mc: MiniCluster) -> Iterator[Problem]:
    """Volumes are pod-wide and keyed by name, so two containers naming one volume must mean the same one."""
    first: dict[str, tuple[str, object]] = {}
    for group in ("containers", "services"):
        for index, container in enumerate(getattr(mc.spec, group)):
            for name, volume in container.volumes.items():
                source = volume.model_dump(exclude={"path", "read_only"})
                path = join_path("spec", group, index, "volumes", name)
                if name in first and first[name][1] != source:
                    yield Problem(path, f"volume {name!r} is defined differently at {first[name][0]}")
                first.setdefault(name, (path, source))


def _flux(mc: MiniCluster) -> Iterator[Problem]:
    flux = mc.spec.flux
    try:
        if parse_fsd(flux.connect_timeout) < 0:
            raise ValueError("negative")
    except ValueError as exc:
        yield Problem("spec.flux.connectTimeout", str(exc))
    if flux.topology and not TOPOLOGY.fullmatch(flux.topology):
        yield Problem(
            "spec.flux.topology",
            f"{flux.topology!r} is not a Flux topology (kary:N, binomial, mincrit[:N], custom)",
        )
    if flux.curve_cert:
        try:
            parse_zcert(flux.curve_cert)
        except CurveCertError as exc:
            yield Problem("spec.flux.curveCert", f"not a usable curve certificate: {exc}")
    if flux.broker_config:
        try:
            tomllib.loads(flux.broker_config)
        except tomllib.TOMLDecodeError as exc:
            yield Problem("spec.flux.brokerConfig", f"not valid TOML: {exc}")
    yield from bursting_problems(mc)
    if flux.flavour == "builtin" and flux.scheduler.queue_policy not in BUILTIN_QUEUE_POLICIES:
        yield Problem(
            "spec.flux.scheduler.queuePolicy",
            f"{flux.scheduler.queue_policy!r} needs flavour 'flux' (fluxion); the builtin broker offers fcfs and easy",
        )
    yield from _resources(flux.container.resources, "spec.flux.container.resources")


def _labels(mc: MiniCluster) -> Iterator[Problem]:
    groups = {
        "spec.pod.labels": mc.spec.pod.labels,
        "spec.jobLabels": mc.spec.job_labels,
        "metadata.labels": mc.metadata.labels,
    }
    for path, labels in groups.items():
        for key, value in labels.items():
            error = label_key_error(key) or label_value_error(value)
            if error:
                yield Problem(f"{path}.{key}", error)
    for key in mc.spec.pod.annotations:
        error = label_key_error(key)
        if error:
            yield Problem(f"spec.pod.annotations.{key}", error)
    for index, toleration in enumerate(mc.spec.pod.tolerations):
        if toleration.operator == "Exists" and toleration.value:
            yield Problem(f"spec.pod.tolerations[{index}].value", "must be empty when operator is Exists")


def _restful(mc: MiniCluster) -> Iterator[Problem]:
    restful = mc.spec.restful
    if restful.secret_name:
        error = dns1123_label_error(restful.secret_name)
        if error:
            yield Problem("spec.restful.secretName", error)
    if restful.enabled and restful.port == 8050:
        yield Problem("spec.restful.port", "8050 is the brokers' overlay port; choose another")


def _profiling(mc: MiniCluster) -> Iterator[Problem]:
    profiling = mc.spec.profiling
    if profiling.boundary and not MPI_CALL.fullmatch(profiling.boundary):
        yield Problem("spec.profiling.boundary", f"{profiling.boundary!r} is not an MPI call name (e.g. MPI_Allreduce)")
    if profiling.directory and not profiling.directory.startswith("/"):
        yield Problem("spec.profiling.directory", f"{profiling.directory!r} must be an absolute path")


def _placement(mc: MiniCluster) -> Iterator[Problem]:
    """spec.placement: contradictions with the shape, multiplexing and autoscaling; what exclusive CPUs need."""
    spec, placement = mc.spec, mc.spec.placement
    if placement.policy != "none":
        if spec.autoscale.enabled or spec.effective_max_size != spec.size:
            yield Problem(
                "spec.placement.policy",
                f"{placement.policy!r} fixes the job's shape from its ranks and nodes; it cannot be combined with "
                "autoscaling or a maxSize other than size",
            )
        if spec.multiplexing.enabled:
            yield Problem(
                "spec.placement.policy",
                "the multiplexing controller shapes the pods' CPU itself; use placement policy none with it",
            )
        if placement.groups:
            yield Problem("spec.placement.groups", f"set by the {placement.policy!r} policy; leave it 0")
    elif placement.groups > spec.size:
        yield Problem("spec.placement.groups", f"{placement.groups} task groups for {spec.size} pod(s): one is empty")
    if placement.cpus == "exclusive":
        if spec.multiplexing.enabled:
            yield Problem(
                "spec.placement.cpus",
                "exclusive CPUs pin each pod to its own cores, while multiplexing shares and resizes them in place; "
                "choose one (cpus: shared, or multiplexing disabled)",
            )
        yield from _exclusive_resources(mc)


def _granularity(mc: MiniCluster) -> Iterator[Problem]:
    """Its own rule: it reads spec.tasks and spec.size, which may have been refused (check_minicluster)."""
    spec = mc.spec
    if spec.placement.policy == "granularity" and spec.tasks < spec.size:
        yield Problem(
            "spec.placement.policy",
            f"granularity gives each node at least one rank, but tasks ({spec.tasks}) is below size ({spec.size}, "
            "the nodes the job may use); raise tasks or lower size",
        )


def _exclusive_resources(mc: MiniCluster) -> Iterator[Problem]:
    """Guaranteed QoS needs a memory request on every container, whole cores for the broker's, no other limits."""
    runner = mc.spec.flux_runner_index
    groups = (("containers", mc.spec.containers), ("services", mc.spec.services))
    for group, items in groups:
        for index, container in enumerate(items):
            path = join_path("spec", group, index, "resources")
            requests, limits = container.resources.requests, container.resources.limits
            if "memory" not in requests:
                yield Problem(
                    f"{path}.requests.memory",
                    "required with spec.placement.cpus: exclusive (Guaranteed QoS: memory limit = request)",
                )
            for name, limit in limits.items():
                if name in requests and parse_quantity(limit) != parse_quantity(requests[name]):
                    yield Problem(f"{path}.limits.{name}", "with exclusive CPUs limits equal requests; drop the limit")
            is_runner = group == "containers" and index == runner
            if not is_runner and "cpu" not in requests:
                yield Problem(f"{path}.requests.cpu", "required with spec.placement.cpus: exclusive (Guaranteed QoS)")
            cpu = requests.get("cpu")
            whole = cpu is None or (parse_quantity(cpu) == int(parse_quantity(cpu)) and parse_quantity(cpu) >= 1)
            if is_runner and mc.spec.placement.policy == "none" and not whole:
                yield Problem(
                    f"{path}.requests.cpu",
                    f"{cpu!r}: exclusive CPUs are whole cores (the static CPU manager pins integer requests)",
                )


def _archive(mc: MiniCluster) -> Iterator[Problem]:
    archive = mc.spec.archive
    if archive.path and not archive.path.startswith("/"):
        yield Problem("spec.archive.path", f"{archive.path!r} must be an absolute path")
    if archive.path and "," in archive.path:
        yield Problem("spec.archive.path", f"{archive.path!r}: a comma cannot be passed in a broker option")
    if archive.claim_name:
        if not archive.path:
            yield Problem("spec.archive.path", f"claimName {archive.claim_name!r} needs the archive's path")
        elif archive.path.rsplit("/", 1)[0] in ("", "/"):
            yield Problem("spec.archive.path", f"{archive.path!r}: put the archive in a directory (the volume's)")
        error = dns1123_label_error(archive.claim_name)
        if error:
            yield Problem("spec.archive.claimName", error)


RULES: tuple[Rule, ...] = (
    _names,
    _sizes,
    _containers,
    _volumes_agree,
    _flux,
    _labels,
    _restful,
    _profiling,
    *RUN_RULES,
    _placement,
    _granularity,
    _archive,
)


def check_minicluster(mc: MiniCluster, refused: Collection[tuple[object, str]] = ()) -> list[Problem]:
    """Every rule's problems, in a stable order.

    `refused`: (model, field) pairs whose values failed their type check and were removed from `mc` (load.py). A
    rule that reads one stops there, keeping what it found before: the default standing in for the value would
    have it judge a number the user never wrote (`tasks: 0` was called "tasks (1)")."""
    found: list[Problem] = []
    for rule in RULES:
        try:
            for problem in rule(mc):
                found.append(problem)
        except AttributeError as exc:
            if not any(exc.obj is model and exc.name == field for model, field in refused):
                raise
    return found
