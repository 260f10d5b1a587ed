"""The autoscaling scenario against the Kubernetes backend over the API fake: 1 pod (maxSize 4), 20 jobs of 1-4
nodes; it scales up, runs them all, scales back down after the idle period, and the Indexed Job follows."""

from __future__ import annotations

from pathlib import Path

from elasticity.policy.autoscale import AutoscaleOptions
from elasticity.sim.autoscale_run import random_jobs, run_autoscale_scenario
from miniclusters.backends.kubernetes.api import JOB, MINICLUSTER
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.ports import ports_for
from miniclusters.testing.fake_kube import FakeKube


def test_autoscaler_scales_the_indexed_job_up_and_down_and_loses_nothing(
    backend: KubernetesBackend, fake: FakeKube, make_mc, tmp_path: Path
) -> None:
    backend.create(make_mc(size=1, maxSize=4))
    clock = [0.0]
    observer, actuator = ports_for(backend)
    options = AutoscaleOptions(idle_seconds=60, cooldown_seconds=20)
    queue, events = run_autoscale_scenario(
        observer, actuator, "demo", random_jobs(20, 4, seed=7), options, tmp_path / "events.jsonl", clock=clock
    )
    sizes = [e["size"] for e in events if e["kind"] == "sample"]
    assert sizes[0] == 1 and max(sizes) == 4 and sizes[-1] == 1
    assert queue.finished == 20 and all(job.requeues == 0 for job in queue.jobs.values())
    # Every scale went through the API: the MiniCluster's size and the Job's parallelism == completions.
    scaled = [e["size"] for e in events if e["kind"] == "scaled"]
    assert 4 in scaled and scaled[-1] == 1
    assert fake.stored(MINICLUSTER, "demo")["spec"]["size"] == 1
    job = fake.stored(JOB, "demo")["spec"]
    assert job["parallelism"] == job["completions"] == 1
    patches = [c for c in fake.writes() if c.kind == "Job" and c.verb == "patch"]
    assert len(patches) >= 2
