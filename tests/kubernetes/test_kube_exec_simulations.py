"""The operator's simulations port against the API fake: Flux jobs submitted, listed and cancelled in the lead pod
through exec, progress read from the lead, and every pod's PMPI traces copied (base64 over exec) into the same
profile the local controller computes: no file system shared with the operator."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from elasticity.profiling.trace import EVENT_DTYPE, encode_trace
from miniclusters.backends.base import ExecResult
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.kube_shapes import Pod
from miniclusters.multiplex.exec_simulations import FETCH_TRACES, ExecSimulations
from miniclusters.testing.fake_exec import default_exec
from miniclusters.testing.fake_kube import FakeKube

WORKDIR = "/run/flux/multiplex"
CALLS = ("MPI_Barrier",)
DUTY = {0: 0.1, 1: 0.1, 2: 0.1, 3: 0.9}


def trace(rank: int, host: str, iterations: int = 60) -> bytes:
    """`iterations` of 10 us: computing for duty x 10 us, then waiting in MPI_Barrier for the rest."""
    events = [(0, i * 10_000 + int(DUTY[rank] * 10_000), (i + 1) * 10_000) for i in range(iterations)]
    return encode_trace(
        rank, 4, np.array(events, dtype=EVENT_DTYPE), CALLS, hostname=host, jobid="fsim1", pid=100 + rank
    )


class Pods:
    """What the pods answer: Flux in the lead, files where the ranks wrote them (ranks 0-1 on pod 0, 2-3 on 1)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.profiled = False
        self.state = "RUN"

    def __call__(self, fake: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        name = pod["spec"]["hostname"]  # demo-<index>, as a rank's trace names its host
        self.calls.append((name, argv))
        words = argv[4:] if argv[:2] == ["sh", "-c"] and argv[2] != FETCH_TRACES else argv
        if words[0].endswith("/flux") and words[1] == "submit":
            assert name == "demo-0"
            return ExecResult(0, "fsim1\n", "")
        if words[0].endswith("/flux") and words[1] == "jobs":
            return ExecResult(0, f"JOBID\tSTATUS\tRC\nfsim1\t{self.state}\n", "")
        if words[0].endswith("/flux") and words[1] == "cancel":
            self.state = "CANCELED"
            return ExecResult(0, "", "")
        if words[:2] == ["mkdir", "-p"]:
            return ExecResult(0, "", "")
        if words[0] == "cat" and words[1] == f"{WORKDIR}/sim1/error.txt":  # the solver's stderr, read on failure
            return ExecResult(0, "\nprimary job terminated abnormally\nrank 3 exited 9\nmpirun: abort\nmore\n", "")
        if words[0] == "cat":
            assert name == "demo-0" and words[1] == f"{WORKDIR}/sim1/progress.log"
            return ExecResult(0, "".join(f"iteration {i}\n" for i in range(1, 74)), "")
        if argv[:3] == ["sh", "-c", FETCH_TRACES]:
            assert argv[4] == f"{WORKDIR}/sim1/pmpi"
            if not self.profiled:
                return ExecResult(0, "", "")
            index = int(name.rsplit("-", 1)[1])
            ranks = (0, 1) if index == 0 else (2, 3)
            lines = [f"pmpi.fsim1.{r}.bin {base64.b64encode(trace(r, name)).decode()}\n" for r in ranks]
            return ExecResult(0, "".join(lines), "")
        return default_exec(fake, pod, argv)


@pytest.fixture
def pods(fake: FakeKube) -> Pods:
    answers = Pods()
    fake.exec_handler = answers
    return answers


def test_jobs_progress_and_traces_of_every_pod_through_exec(
    backend: KubernetesBackend, fake: FakeKube, make_mc, pods: Pods, tmp_path: Path
) -> None:
    from miniclusters.autoscaling.queue import lead_flux

    backend.create(make_mc(size=2, tasks=4))
    sims = ExecSimulations(
        backend, "demo", ["proxy_solver", "100"], 4, 2, Path(WORKDIR), {"demo-0": 0, "demo-1": 1},
        equal_per_rank_m=450, flux=tuple(lead_flux()), cache=tmp_path,
    )  # fmt: skip
    answer = sims.submit("sim1", 50)
    assert answer.ok and answer.job_id == "fsim1", answer.reason
    made = [(pod, argv[2]) for pod, argv in pods.calls if argv[:2] == ["mkdir", "-p"]]
    assert made == [("demo-0", f"{WORKDIR}/sim1/pmpi"), ("demo-1", f"{WORKDIR}/sim1/pmpi")]
    submitted = next(argv for _, argv in pods.calls if "submit" in argv)
    assert "-o" in submitted and "pmpi=50" in submitted and f"pmpi-dir={WORKDIR}/sim1/pmpi" in submitted
    assert (tmp_path / "sim1" / "command").read_text().startswith("sh -c")

    view = sims.observe()["sim1"]
    assert view.state == "running" and view.iterations == 73 and view.profile is None, "no traces yet"

    pods.profiled = True
    profile = sims.observe()["sim1"].profile
    assert profile is not None
    assert dict(profile.placement) == {0: (0, 1), 1: (2, 3)}, "each pod's ranks, from the traces' hostnames"
    assert [round(d, 1) for d in profile.duty] == [0.1, 0.1, 0.1, 0.9]
    assert sims.pids_of("sim1") == {0: [100, 101], 1: [102, 103]}
    fetched = len([1 for _, argv in pods.calls if argv[:3] == ["sh", "-c", FETCH_TRACES]])
    sims.observe()
    assert len([1 for _, argv in pods.calls if argv[:3] == ["sh", "-c", FETCH_TRACES]]) == fetched, "cached"

    sims.cancel("sim1", "test over")
    assert sims.observe()["sim1"].state == "cancelled"
    assert (tmp_path / "sim1" / "cancelled").read_text() == "test over\n"
    # a failed job's reason: its result and exit code, and the first lines of its error output
    pods.state = "FAILED\t9\t\t"
    failed = sims.observe()["sim1"]
    assert failed.state == "failed" and not failed.lost
    assert failed.reason == (
        "flux job fsim1: FAILED rc=9; error: primary job terminated abnormally | rank 3 exited 9 | mpirun: abort"
    )


def test_a_lead_that_cannot_make_the_directory_fails_the_submission_with_its_words(
    backend: KubernetesBackend, fake: FakeKube, make_mc, tmp_path: Path
) -> None:
    def refuse(fake: FakeKube, pod: Pod, argv: list[str]) -> ExecResult:
        if argv[:2] == ["mkdir", "-p"]:
            return ExecResult(1, "", "mkdir: cannot create directory: Read-only file system\n")
        return default_exec(fake, pod, argv)

    fake.exec_handler = refuse
    backend.create(make_mc(size=2, tasks=4))
    sims = ExecSimulations(backend, "demo", ["x"], 4, 2, Path(WORKDIR), {"demo-0": 0}, cache=tmp_path)
    answer = sims.submit("sim1", 50)
    assert not answer.ok and "Read-only file system" in answer.reason


def test_the_operator_wiring_runs_flux_at_the_lead_socket_in_a_fresh_run_directory(
    backend: KubernetesBackend, fake: FakeKube, make_mc
) -> None:
    from miniclusters.multiplex.kube_loop import budget_m, exec_simulations
    from miniclusters.multiplex.settings import multiplex_config

    mc = make_mc(size=2, tasks=4, multiplexing={"enabled": True, "command": "proxy_solver 100", "max": 2})
    backend.create(mc)
    status = backend.status("demo")
    config = multiplex_config(status, mc.spec.multiplexing.model_dump(by_alias=True), 4, budget_m(mc))
    sims = exec_simulations(backend, mc, config, status)
    assert isinstance(sims, ExecSimulations)
    assert sims.workdir.parent == Path(WORKDIR) and sims.workdir.name.startswith("run-"), sims.workdir
    assert sims.flux[:2] == ("sh", "-c") and sims.flux[-1].endswith("/bin/flux")
    assert sims.pod_of_host["demo-0"] == 0 and sims.pod_of_host["demo-1"] == 1
    assert budget_m(mc) == 2000 and config.max_simulations == 2 and config.ranks == 4
