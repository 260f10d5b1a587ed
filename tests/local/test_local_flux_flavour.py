"""The `flux` flavour on the local backend against REAL flux-core (built by `make flux-core`): the same rendered
config, certificate, R and entrypoint as on Kubernetes, with the built prefix as the flux-view mount.

Readiness (all ranks up) is observed through the lead's socket under both layouts (flux-core 0.88's
`<rundir>/local-0`, the built-in broker's `<rundir>/local`); jobs run across pods; pods added by scale-up join as
their pre-registered ranks and removed ones go offline; a clean `flux shutdown` ends the lead with 0.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from miniclusters.backends.local import flux_view, process
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.backends.overlay import overlay_argv, parse_overlay, with_lead_socket
from miniclusters.render import lead_restart

pytestmark = pytest.mark.needs_root

SOCKET = {"flux": "local-0", "builtin": "local"}


def _status(mc: Any, name: str) -> dict[str, Any]:
    result = mc("status", name, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _rundir(backend: LocalBackend, name: str, index: int) -> Path:
    return backend.store.pod_dir(name, index) / "run" / "rundir"


def _broker_version(mc: Any, name: str) -> str:
    return mc("exec", name, "--", "flux", "version").stdout


@pytest.mark.parametrize("flavour", ["flux", "builtin"])
def test_ready_when_every_rank_is_up_under_both_socket_layouts(
    mc: Any, machine: Any, backend: LocalBackend, spec_writer: Any, flux_core: flux_view.FluxCore, flavour: str
) -> None:
    spec = spec_writer(machine.state_dir, f"rd{flavour[0]}", size=3, max_size=4)
    name = spec.stem
    up = mc("up", str(spec), "--flavour", flavour, "--detach", "--timeout", "60")
    assert up.returncode == 0, up.stderr
    status = _status(mc, name)
    assert status["ranks_up"] == [0, 1, 2] and status["ranks_down"] == [3]  # rank 3: registered, never started
    assert all(p["ready"] for p in status["pods"])
    rundir = _rundir(backend, name, 0)
    assert (rundir / SOCKET[flavour]).is_socket()
    assert not (rundir / SOCKET["builtin" if flavour == "flux" else "flux"]).exists()
    assert ("libflux-core" in _broker_version(mc, name)) == (flavour == "flux")  # really flux-core, or really ours
    # Only our broker's socket is offered to our client: flux-core's never answered it, and `minicluster status`
    # waited out a 5 s RPC on every look (its drain report), or each controller observation its 30 s.
    uri = backend.lead_uri(name)
    assert uri == (None if flavour == "flux" else f"local://{rundir / 'local'}")

    # The Kubernetes backend's readiness probe (run in the lead pod there) finds the socket of either layout.
    flux = str(flux_core.flux) if flavour == "flux" else str(Path(backend.store.load(name).broker_dir) / "bin/flux")
    probe = subprocess.run(
        with_lead_socket(str(rundir), overlay_argv(flavour, flux)), capture_output=True, text=True, timeout=30
    )
    assert probe.returncode == 0, probe.stderr
    assert parse_overlay(probe.stdout) == ((0, 1, 2), (3,))
    empty = subprocess.run(with_lead_socket(str(machine.state_dir), ["true"]), capture_output=True, text=True)
    assert empty.returncode == 69 and "no broker socket" in empty.stderr


def test_jobs_run_across_pods_and_scale_uses_pre_registered_ranks(
    mc: Any, machine: Any, backend: LocalBackend, spec_writer: Any, waiter: Any, flux_core: flux_view.FluxCore
) -> None:
    spec = spec_writer(machine.state_dir, "fx", size=2, max_size=4)
    assert mc("up", str(spec), "--flavour", "flux", "--detach", "--timeout", "60").returncode == 0
    ran = mc("exec", "fx", "--", "flux", "run", "-N2", "-n2", "--label-io", "hostname")
    assert ran.returncode == 0, ran.stderr
    assert sorted(ran.stdout.split()) == ["0:", "1:", "fx-0", "fx-1"]  # each task on its own pod
    resources = mc("exec", "fx", "--", "flux", "resource", "list", "-s", "down", "-no", "{nodelist}")
    assert resources.stdout.strip() == "fx-[2-3]"

    grow = mc("scale", "fx", "4")
    assert grow.returncode == 0, grow.stderr
    assert waiter(lambda: _status(mc, "fx")["ranks_up"] == [0, 1, 2, 3], timeout=30)
    submit = mc("exec", "fx", "--", "flux", "submit", "-N4", "-n4", "hostname")
    assert submit.returncode == 0, submit.stderr
    attached = mc("exec", "fx", "--", "flux", "job", "attach", submit.stdout.strip())
    assert attached.returncode == 0, attached.stderr
    assert sorted(attached.stdout.split()) == ["fx-0", "fx-1", "fx-2", "fx-3"]

    shrink = mc("scale", "fx", "2")
    assert shrink.returncode == 0, shrink.stderr
    assert waiter(lambda: _status(mc, "fx")["ranks_down"] == [2, 3], timeout=30)
    down = mc("exec", "fx", "--", "flux", "resource", "list", "-s", "down", "-no", "{nodelist}")
    assert down.stdout.strip() == "fx-[2-3]"
    again = mc("exec", "fx", "--", "flux", "run", "-N2", "hostname")
    assert again.returncode == 0 and sorted(again.stdout.split()) == ["fx-0", "fx-1"]
    assert mc("down", "fx").returncode == 0


def test_spec_command_runs_through_the_real_lead(mc: Any, machine: Any, spec_writer: Any, flux_core: Any) -> None:
    spec = spec_writer(machine.state_dir, "cmd", size=2, max_size=2, interactive=False, command="hostname", tasks=2)
    run = mc("up", str(spec), "--flavour", "flux", "--timeout", "60")
    assert run.returncode == 0, run.stderr
    assert {"cmd-0", "cmd-1"} <= set(run.stdout.split())
    failing = spec_writer(machine.state_dir, "bad", size=1, max_size=1, interactive=False, command="false")
    assert mc("up", str(failing), "--flavour", "flux", "--timeout", "60").returncode == 1


@pytest.mark.parametrize("flavour", ["flux", "builtin"])
def test_clean_shutdown_ends_the_interactive_lead_with_0(
    mc: Any, machine: Any, spec_writer: Any, waiter: Any, flux_core: Any, flavour: str
) -> None:
    """Real flux-core reports a hung-up initial program as failed (129 for `sleep infinity`): the lead runs none."""
    spec = spec_writer(machine.state_dir, f"sd{flavour[0]}", size=2, max_size=2)
    name = spec.stem
    assert mc("up", str(spec), "--flavour", flavour, "--detach", "--timeout", "60").returncode == 0
    assert mc("exec", name, "--", "flux", "shutdown").returncode == 0
    assert waiter(lambda: _status(mc, name)["finished"], timeout=30)
    pods = {p["index"]: p for p in _status(mc, name)["pods"]}
    assert pods[0]["phase"] == "Succeeded" and pods[0]["exit_code"] == 0
    assert pods[1]["exit_code"] == 0


def test_flux_flavour_without_flux_core_says_how_to_get_it(
    mc: Any, machine: Any, spec_writer: Any, tmp_path: Path
) -> None:
    spec = spec_writer(machine.state_dir, "nofx", size=1, max_size=1)
    env = {"FLUX_CORE_PREFIX": str(tmp_path)}
    refused = mc("up", str(spec), "--flavour", "flux", "--detach", env=env)
    assert refused.returncode == 1 and "FLUX_CORE_PREFIX" in refused.stderr and "no flux-core install" in refused.stderr
    assert "nofx" not in mc("list").stdout  # nothing was created


def test_pmpi_profiles_a_real_flux_job_through_ld_preload_in_the_jobspec(
    mc: Any, machine: Any, tmp_path: Path, flux_core: Any
) -> None:
    """spec.profiling on the flux flavour: the lead builds the profiler and submits with
    --env=LD_PRELOAD=...; flux-core starts the 4 ranks itself on 2 pods, each writes its trace."""
    from broker.testing import require_tool
    from elasticity.profiling.duty_cycle import analyze_job
    from elasticity.profiling.trace import read_job_traces

    require_tool("mpicc", "libopenmpi-dev openmpi-bin")
    spin = tmp_path / "spin_mpi"
    source = Path(__file__).resolve().parents[1] / "elasticity" / "data" / "spin_mpi.c"
    subprocess.run(["mpicc", "-O2", "-o", str(spin), str(source)], check=True, timeout=120)
    traces = tmp_path / "traces"
    spec = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "pm"},
        "spec": {
            "size": 2,
            "tasks": 4,
            "flux": {"flavour": "flux"},
            "profiling": {"enabled": True, "directory": str(traces)},
            "containers": [{"image": "local", "command": f"{spin} 12 2000"}],
        },
    }
    path = tmp_path / "pm.yaml"
    path.write_text(json.dumps(spec))
    mpi = {"OMPI_MCA_btl": "tcp,self", "OMPI_MCA_mpi_yield_when_idle": "1"}
    run = mc("up", str(path), "--timeout", "90", env=mpi, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    found = read_job_traces(traces)
    assert sorted(t.rank for t in found) == [0, 1, 2, 3]  # every rank, across both pods
    analysis = analyze_job(found)
    assert analysis.iterations == (12, 12, 12, 12)
    assert {r.hostname for r in analysis.ranks} == {"pm-0", "pm-1"}
    assert analysis.duty[0] == min(analysis.duty)  # rank r spins (r+1) units per iteration


def test_crashed_real_lead_restarts_with_its_queue_and_followers_rejoin(
    mc: Any, machine: Any, backend: LocalBackend, spec_writer: Any, waiter: Any, flux_core: Any
) -> None:
    """The lead's flux-broker is killed (a crash: no clean shutdown); the pod restarts it in place, as the kubelet
    restarts a container: the rendered [kvs] checkpoint-period brings the queue back from the statedir. The old
    follower is sent a disconnect by the new lead, exits 1 and, restarted the same way, rejoins as its rank.
    The job that was running cannot be reattached: it fails with the lead-restart note (render/lead_restart.py)."""
    import os
    import signal as signals

    spec = spec_writer(machine.state_dir, "lr", size=2, max_size=2)
    fast = {"MINICLUSTERS_LOCAL_RESTART_DELAY": "0.2"}
    assert mc("up", str(spec), "--flavour", "flux", "--detach", "--timeout", "60", env=fast).returncode == 0
    held = mc("exec", "lr", "--", "flux", "submit", "--urgency=hold", "echo", "after-restart").stdout.strip()
    running = mc("exec", "lr", "--", "flux", "submit", "sleep", "300").stdout.strip()
    assert waiter(lambda: "R" in mc("exec", "lr", "--", "flux", "jobs", "-no", "{state_single}", running).stdout)
    # past checkpoint-period the KVS root holding both jobs is on disk (flux-core shows nothing to wait for)
    time.sleep(2.5)  # sleep: past flux-core's checkpoint-period
    brokers = [p for p in process.tagged(process.tag_for(backend.store.cluster_dir("lr"), 0)) if _is_broker(p)]
    assert brokers, "no flux-broker in the lead pod"
    for pid in brokers:
        os.kill(pid, signals.SIGKILL)

    def rejoined() -> Any:
        status = _status(mc, "lr")
        return status["pods"][0]["restarts"] >= 1 and status["ranks_up"] == [0, 1] and status

    back = waiter(rejoined, timeout=90)
    assert back, _status(mc, "lr")
    assert back["pods"][1]["restarts"] >= 1  # the follower left on the new lead's disconnect and came back
    assert "sent disconnect" in (backend.store.pod_dir("lr", 1) / process.LOG_FILE).read_text()
    jobs = mc("exec", "lr", "--", "flux", "jobs", "-a", "-no", "{id.f58} {state} {result}").stdout
    states = {line.split()[0]: line.split()[1:] for line in jobs.splitlines()}
    assert states[held] == ["SCHED"]  # accepted before the crash, still queued
    assert states[running][0] == "INACTIVE"  # its processes died with the lead; flux-core fails it
    # ... with a note that says why, raised before flux-core's own "failed to create guest ns"
    note = mc("exec", "lr", "--", "flux", "jobs", "-no", "{exception.type}:{exception.note}", running).stdout.strip()
    assert note == f"exec:{lead_restart.NOTE}"
    events = mc("exec", "lr", "--", "flux", "job", "eventlog", running).stdout
    assert "guest ns" not in events and events.count("exception") == 1
    assert mc("exec", "lr", "--", "flux", "job", "urgency", held, "default").returncode == 0
    attached = mc("exec", "lr", "--", "flux", "job", "attach", held)
    assert attached.returncode == 0 and attached.stdout.strip() == "after-restart"


def _is_broker(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().startswith("flux-broker")  # flux-core names it flux-broker-<rank>
    except OSError:
        return False


def test_unprivileged_pods_name_their_flux_core_brokers(
    mc: Any, machine: Any, spec_writer: Any, flux_core: Any
) -> None:
    """Without namespaces every pod shares this machine's hostname: the shim gives flux-core `-Shostname`."""
    env = {"MINICLUSTERS_LOCAL_UNPRIVILEGED": "1"}
    spec = spec_writer(machine.state_dir, "un", size=2, max_size=3)
    up = mc("up", str(spec), "--flavour", "flux", "--detach", "--timeout", "60", env=env)
    assert up.returncode == 0, up.stderr
    assert _status(mc, "un")["ranks_up"] == [0, 1]
    assert mc("exec", "un", "--", "flux", "getattr", "hostlist").stdout.strip() == "un-[0-2]"
    ran = mc("exec", "un", "--", "flux", "run", "-N2", "-n2", "flux", "getattr", "rank")
    assert sorted(ran.stdout.split()) == ["0", "1"]
    assert mc("down", "un").returncode == 0


RING = """#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size; double one = 1, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 20000; i++) MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("ranks %d sum %g\\n", size, sum);
    MPI_Finalize();
    return 0;
}
"""


def test_mpi_ranks_on_pods_sharing_the_cores_yield_and_finish(
    mc: Any, machine: Any, spec_writer: Any, flux_core: Any, tmp_path: Path
) -> None:
    """flux-core's shell starts Open MPI's ranks itself, and Open MPI busy-polls unless it knows ranks outnumber the
    slots: on pods sharing this machine's cores, 4 ranks of 20,000 reductions had not finished after 2 minutes. The
    pods' environment carries OMPI_MCA_mpi_yield_when_idle=1, so every job inherits it (2.3 s)."""
    (tmp_path / "ring.c").write_text(RING)
    subprocess.run(["mpicc", "-O2", "-o", str(tmp_path / "ring"), str(tmp_path / "ring.c")], check=True, timeout=120)
    spec = spec_writer(machine.state_dir, "fy", size=2, max_size=2, tasks=4)
    assert mc("up", str(spec), "--flavour", "flux", "--detach", "--timeout", "60").returncode == 0
    said = mc("exec", "fy", "--", "flux", "run", "-N2", "-n2", "printenv", "OMPI_MCA_mpi_yield_when_idle")
    assert said.returncode == 0 and said.stdout.split() == ["1", "1"], said.stderr
    ran = mc("exec", "fy", "--", "flux", "run", "-N2", "-n4", str(tmp_path / "ring"))
    assert ran.returncode == 0, ran.stderr
    assert "ranks 4 sum 4" in ran.stdout
    assert mc("down", "fy").returncode == 0
