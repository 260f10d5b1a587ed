"""Wire the multiplexing loop to a running MiniCluster: ports, simulations, per-job cgroups, state for status.

`open_session` builds everything the runner needs from a backend and a cluster name; `save_state` writes the
controller's state where `minicluster status` finds it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import atomic
from elasticity.control.multiplex import MultiplexPlanner, summary_rows
from elasticity.control.multiplex_ports import JobShares
from elasticity.control.multiplex_types import MultiplexConfig
from elasticity.control.ports import Actuator, Observer
from miniclusters.backends.base import Backend, InvalidRequestError
from miniclusters.backends.ports import ports_for
from miniclusters.multiplex.flux_simulations import MPI_SETTINGS, WAIT_MODE, FluxSimulations
from miniclusters.multiplex.state_file import MultiplexState


@dataclass
class Session:
    planner: MultiplexPlanner
    observer: Observer
    actuator: Actuator
    simulations: FluxSimulations
    shares: JobShares | None
    shares_note: str
    workdir: Path
    pod_identity: dict[int, object]
    identity: Any = None
    """name -> pod index -> (pid, start time) on the local backend: proves resizes left the pods in place."""
    started_by: str = "cli"
    """Who runs the controller: "cli" (`minicluster multiplex`), "up" (spec.multiplexing) or "operator"."""


def _local_extras(backend: Backend, name: str) -> tuple[Any, Any, str]:
    """(identity function, job shares, note) for the local backend: pids and child cgroups."""
    from miniclusters.backends.local import cgroups

    store = getattr(backend, "store", None)

    def identity(cluster: str) -> dict[int, object]:
        if store is None:
            return {}
        record = store.load(cluster)
        return {i: (p.pid, p.start_ticks) for i, p in record.pods.items()}

    driver = cgroups.detect()
    if driver is None or not driver.cluster_dir(name).exists():
        return identity, None, "pod level only: this machine's pods have no cgroups (not root?)"
    return identity, driver, f"per-job child cgroups (cgroup v{driver.version}, {driver.knob})"


CONTAINER_BACKENDS = ("podman",)
"""Backends whose pods are containers of this machine: they share no file system with this process (simulations'
files are reached through exec), and the image carries the built-in `proxy_solver` and the PMPI library (the
openmpi-openfoam image builds both from our C sources), so neither is compiled here for them."""


def _in_containers(
    backend: Backend,
    name: str,
    argv: list[str],
    ranks: int,
    nodes: int,
    workdir: Path,
    pod_of_host: dict[str, int],
    **options: Any,
) -> FluxSimulations:
    """Simulations writing under `<run dir>/multiplex/<workdir's name>` in the pods (the run volume), their traces
    and notes copied into `workdir` here."""
    from miniclusters.multiplex.exec_simulations import ExecSimulations
    from miniclusters.render.layout import RUN_DIR

    in_pods = Path(RUN_DIR) / "multiplex" / workdir.name
    return ExecSimulations(backend, name, argv, ranks, nodes, in_pods, pod_of_host, cache=workdir, **options)


def wait_settings(spin_us: int | None) -> dict[str, str]:
    """What every job gets (MPI_SETTINGS), with the sleeping wait's spin when one is asked for (`--mpi-spin-us`:
    reaches every rank through the job's environment, broker/modules/pmpi.py)."""
    settings = dict(MPI_SETTINGS)
    if spin_us is not None:
        settings["MC_MPI_WAIT_SPIN_US"] = str(spin_us)
    return settings


def open_session(
    backend: Backend,
    backend_name: str,
    name: str,
    command: str,
    config: MultiplexConfig,
    workdir: Path,
    boundary: str = "MPI_Barrier",
    wait: str = WAIT_MODE,
    spin_us: int | None = None,
) -> Session:
    argv = shlex.split(command)
    if not argv:
        raise InvalidRequestError("--command: empty; give the simulation's MPI program and its arguments")
    in_containers = backend_name in CONTAINER_BACKENDS
    if argv[0] == "proxy_solver" and not in_containers and shutil.which("proxy_solver") is None:
        from elasticity.workloads.proxy import build_proxy_solver

        argv[0] = str(build_proxy_solver())  # the built-in proxy (elasticity/workloads/proxy_solver.c)
    status = backend.status(name)
    pod_of_host = {f"{name}-{p.index}": p.index for p in status.pods}
    pod_of_host.update({p.name: p.index for p in status.pods})
    identity = None
    shares: JobShares | None = None
    note = "pod level only: Kubernetes pods' cgroups are not delegated to the controller"
    workdir.mkdir(parents=True, exist_ok=True)
    simulations = (FluxSimulations if not in_containers else _in_containers)(
        backend,
        name,
        argv,
        config.ranks,
        config.nodes,
        workdir,
        pod_of_host,
        equal_per_rank_m=config.equal_per_rank_m,
        boundary=boundary,
        wait=wait,
        env=wait_settings(spin_us),
    )
    if backend_name == "local":
        from miniclusters.backends.local.job_cgroups import LocalJobShares

        identity, driver, note = _local_extras(backend, name)
        lead_uri = getattr(backend, "lead_uri", None)
        if lead_uri is not None:
            simulations.lead_uri = lead_uri(name)  # None under flux-core: its jobs are read through the pod
        if driver is not None:
            shares = LocalJobShares(driver, name, simulations.pids_of, leaf_m=max(1, config.pod_overhead_m))
    if in_containers:
        identity = getattr(backend, "runner_identity", None)
        note = "pod level only: each pod's CPU request is its container's cpu.shares (`podman update`)"
    observer, actuator = ports_for(backend)
    first = identity(name) if identity is not None else {}
    return Session(
        MultiplexPlanner(config), observer, actuator, simulations, shares, note, workdir, dict(first), identity
    )


def save_state(path: Path, name: str, session: Session, running: bool, extra: MultiplexState | None = None) -> None:
    """The controller's state as JSON (atomically replaced), for `minicluster status NAME`."""
    planner = session.planner
    model = planner.model
    state: MultiplexState = {
        "cluster": name,
        "controller_pid": os.getpid(),
        "running": running,
        "updated": time.time(),
        "phase": planner.phase,
        "simulations": summary_rows(planner),
        "requested_m": session.planner.planned.total_m if session.planner.planned else None,
        "resizes": planner.resizes,
        "restarts": planner.restarts,
        "beta": model.beta if model else None,
        "blocked": planner.blocked,
        "job_shares": session.shares_note,
        "workdir": str(session.workdir),
        "started_by": session.started_by,
        "last_event": planner.events[-1] if planner.events else None,
        **(extra or {}),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, state, default=str)
