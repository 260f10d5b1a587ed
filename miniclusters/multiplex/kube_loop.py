"""The operator's multiplexing loop for one MiniCluster: the same planner and runner as `minicluster multiplex`,
wired to the Kubernetes backend's control ports, to Flux jobs in the lead pod, and to the lead's event log.

The CPU budget is what the spec asks for (size x the runner container's CPU request): the operator does not read
Nodes, and the point of multiplexing is to fit more simulations into the CPU the MiniCluster already has. Job
shares are pod level only (a pod's cgroup is not delegated to the operator).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, cast, runtime_checkable

from elasticity.control.multiplex import MultiplexPlanner
from elasticity.control.multiplex_ports import Simulations
from elasticity.control.multiplex_runner import MultiplexRunner
from elasticity.control.multiplex_types import MultiplexConfig
from elasticity.model.resources import cpu_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import BackendError, ClusterStatus, InvalidRequestError
from miniclusters.backends.kubernetes.api import KubeApi
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.ports import ports_for
from miniclusters.multiplex.event_mirror import ExecMirror, MirroredEventLog, lead_log_path
from miniclusters.multiplex.exec_simulations import ExecSimulations
from miniclusters.multiplex.settings import DEFAULT_POD_OVERHEAD_M, MultiplexSettings, multiplex_config
from miniclusters.operator.multiplex_progress import MultiplexProgress, RunRecord, adopt
from miniclusters.operator.multiplexing import MultiplexStarter, StartedLoop
from miniclusters.render.layout import RUN_DIR

DEFAULT_WORKDIR = f"{RUN_DIR}/multiplex"
"""Where simulations write in the pods when spec.multiplexing.workdir is empty (the pods' run volume)."""

SimulationsFor = Callable[[KubernetesBackend, MiniCluster, MultiplexConfig, ClusterStatus], Simulations]


def budget_m(mc: MiniCluster) -> int:
    """size x the runner container's CPU request: the CPU the simulations share."""
    runner = mc.spec.containers[mc.spec.flux_runner_index]
    cpu = runner.resources.requests.get("cpu")
    if cpu is None:
        raise InvalidRequestError(
            f"spec.containers[{mc.spec.flux_runner_index}].resources.requests.cpu: the multiplexing controller "
            "shares this CPU among the simulations; set it"
        )
    return mc.spec.size * cpu_millicores(str(cpu))


def exec_simulations(
    backend: KubernetesBackend, mc: MiniCluster, config: MultiplexConfig, status: ClusterStatus
) -> Simulations:
    """Flux jobs submitted, watched and cancelled in the lead pod; their files read through exec. Each run of the
    controller writes under its own `run-<UTC time>` directory, so a restarted one never reads the traces or
    progress lines of the simulations before it."""
    from miniclusters.autoscaling.queue import lead_flux

    mux = mc.spec.multiplexing
    argv = mux.command.split()
    pod_of_host = {f"{mc.name}-{p.index}": p.index for p in status.pods}
    pod_of_host.update({p.name: p.index for p in status.pods})
    return ExecSimulations(
        backend,
        mc.name,
        argv,
        config.ranks,
        config.nodes,
        Path(mux.workdir or DEFAULT_WORKDIR) / time.strftime("run-%Y%m%dT%H%M%S", time.gmtime()),
        pod_of_host,
        equal_per_rank_m=config.equal_per_rank_m,
        boundary=mux.boundary or "MPI_Barrier",
        flux=tuple(lead_flux()),
    )


@runtime_checkable
class Resumable(Protocol):
    """Simulations that can hand their run to the next controller (FluxSimulations)."""

    def record(self) -> RunRecord: ...

    def restore(self, record: RunRecord) -> None: ...


def _lead_jobs(backend: KubernetesBackend, name: str) -> dict[str, tuple[str, float]]:
    """Every job of the lead: id (as printed) -> (name, submit time); raises when the lead does not answer
    (without its list an unrecorded submission could be made twice)."""
    from broker.jobs.jobid import encode_f58
    from miniclusters.autoscaling.queue import lead_flux
    from miniclusters.campaign.observe import exec_jobs

    infos = exec_jobs(backend, name, lead_flux())()
    if infos is None:
        raise BackendError("the lead does not answer `flux jobs`: cannot tell which simulations it already runs")
    return {encode_f58(job): (info.name, info.t_submit) for job, info in infos.items()}


def kubernetes_multiplex_starter(
    api: KubeApi,
    simulations_for: SimulationsFor = exec_simulations,
    log_dir: Path | None = None,
    backend_for: Callable[[str], KubernetesBackend] | None = None,
) -> MultiplexStarter:
    """How the operator builds a cluster's runner (tests pass scripted simulations and a fake-clocked backend)."""
    folder = log_dir or Path(tempfile.gettempdir()) / "miniclusters-operator"
    make_backend = backend_for or (lambda namespace: KubernetesBackend(api=api, namespace=namespace))

    def start(
        namespace: str, mc: MiniCluster, clock: Callable[[], float], resume: MultiplexProgress | None = None
    ) -> StartedLoop:
        backend = make_backend(namespace)
        status = backend.status(mc.name)
        if status.ranks_up is not None and len(status.ranks_up) < status.size:
            raise BackendError(f"{status.size - len(status.ranks_up)} broker(s) not up yet")
        budget = budget_m(mc)
        overhead = DEFAULT_POD_OVERHEAD_M
        mux = mc.spec.multiplexing
        ranks = mux.ranks or mc.spec.tasks
        equal = max(1, (budget - overhead * mc.spec.size) // ranks)
        settings = cast(MultiplexSettings, mux.model_dump(by_alias=True))  # the model's wire form: these keys
        settings["placementCpus"] = mc.spec.placement.cpus
        config = multiplex_config(
            status,
            settings,
            mc.spec.tasks,
            budget,
            overhead_m=overhead,
            equal_m=equal,
        )
        # the view names no nodes here, so the runner's capacity is cores_per_node x nodes: the budget exactly
        config = dataclasses.replace(config, cores_per_node=budget / 1000 / config.nodes)
        observer, actuator = ports_for(backend)
        simulations = simulations_for(backend, mc, config, status)
        resumable = simulations if isinstance(simulations, Resumable) else None
        adopted: RunRecord | None = None
        if resume is not None:
            if resumable is None:
                raise InvalidRequestError("this controller's simulations cannot go on with an earlier run")
            adopted = adopt(resume.record, resume.started, _lead_jobs(backend, mc.name))
            resumable.restore(adopted)
        mirror = ExecMirror(backend, mc.name, lead_log_path(RUN_DIR, mc.spec.flux.flavour))
        log = MirroredEventLog(folder / f"{namespace}-{mc.name}.jsonl", "multiplex", clock, mirror)
        runner = MultiplexRunner(
            mc.name, MultiplexPlanner(config), observer, actuator, simulations, None, clock=clock, log=log
        )
        note = f"budget {budget}m (size x CPU request); job shares: pod level only (pod cgroups not delegated)"
        if adopted is not None:
            runner.planner.adopt({sim: adopted.attempts.get(sim, 1) for sim in adopted.jobs}, 0.0)
            runner.job_ids.update(adopted.jobs)
            note = f"went on with the run in {adopted.run} ({len(adopted.jobs)} simulations submitted earlier); {note}"
        return StartedLoop(runner, log.flush_mirror, note, resumable.record if resumable is not None else None)

    return start
