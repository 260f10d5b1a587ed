"""The operator's campaign for one MiniCluster on Kubernetes: the same plan, runner and loops as `minicluster up`,
wired to the Kubernetes backend's control ports (the Indexed Job's parallelism, the pods' `resize` subresource)
and to Flux in the lead pod through exec (`flux batch`, `flux jobs`, `flux resource demand|drain`, `flux cancel`).

The members' cases, records and traces live in `spec.campaign.workdir`, which must be a volume the pods and the
operator share (a ReadWriteMany claim, or a hostPath on a one-node cluster): the batch scripts write each
member's records there and the runner reads them, as on the local backend.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from elasticity.control.events import EventLog
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import InvalidRequestError
from miniclusters.backends.kubernetes.api import KubeApi
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.ports import ports_for
from miniclusters.campaign.observe import exec_jobs
from miniclusters.campaign.plan import CampaignPlan, plan_campaign
from miniclusters.campaign.progress import CampaignProgress
from miniclusters.campaign.runner import CampaignRunner
from miniclusters.operator.campaign import CampaignStarter

Prepare = Callable[[MiniCluster, Callable[[str], None]], CampaignPlan]


def shared_workdir(mc: MiniCluster) -> Path:
    spec = mc.spec.campaign
    assert spec is not None
    if not spec.workdir:
        raise InvalidRequestError(
            "spec.campaign.workdir: on Kubernetes the cases live on a volume the pods and the operator share; set "
            "it to where that volume is mounted"
        )
    return Path(spec.workdir)


def kubernetes_campaign_starter(
    api: KubeApi,
    prepare: Prepare | None = None,
    backend_for: Callable[[str], KubernetesBackend] | None = None,
    flux: list[str] | None = None,
) -> CampaignStarter:
    """(namespace, MiniCluster, clock, progress) -> its CampaignRunner, the cases prepared in the shared work
    directory, or (given the progress of a campaign another operator ran) found there as that one left them.
    ``prepare`` defaults to `session.prepare` (OpenFOAM where the operator runs); tests pass a lighter one."""

    def start(
        namespace: str, mc: MiniCluster, clock: Callable[[], float], resume: CampaignProgress | None = None
    ) -> CampaignRunner:
        from miniclusters.autoscaling.queue import lead_flux
        from miniclusters.campaign import session

        spec = mc.spec.campaign
        assert spec is not None
        workdir = shared_workdir(mc)
        if resume is None:
            plan = (prepare or session.prepare)(mc, lambda _line: None)
            assert plan.workdir == plan_campaign(spec, workdir).workdir
        else:  # the cases and scripts are on the shared volume already: preparing again would wipe them
            plan = plan_campaign(spec, workdir)
            missing = [str(e.script) for e in plan.ensembles if not e.script.exists()]
            if missing:
                raise InvalidRequestError(
                    f"spec.campaign.workdir: cannot resume the campaign, its batch scripts are gone: {missing[0]}"
                )
        backend = backend_for(namespace) if backend_for is not None else KubernetesBackend(api=api, namespace=namespace)
        observer, actuator = ports_for(backend)
        argv = flux if flux is not None else lead_flux()
        runner = CampaignRunner(
            backend,
            mc.name,
            plan,
            session.loops_of(mc),
            EventLog(workdir / "events.jsonl", "campaign", clock),  # closed by the supervisor when it stops
            argv,
            "",
            say=lambda _line: None,
            clock=clock,
            observer=observer,
            actuator=actuator,
            jobs_of=exec_jobs(backend, mc.name, argv),
        )
        runner.script_env = session.script_env()
        return runner

    return start
