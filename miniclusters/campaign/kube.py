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
from miniclusters.campaign.plan import CampaignPlan, plan_campaign, script_exports
from miniclusters.campaign.progress import CampaignProgress
from miniclusters.campaign.runner import CampaignRunner
from miniclusters.operator.campaign import CampaignStarter
from miniclusters.render.layout import BROKER_INSTALL_DIR

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


PREPARE_TIMEOUT = 900.0
"""Seconds `minicluster campaign prepare` may take in the lead pod (meshing once, decomposing every member)."""


def prepare_in_lead(backend: KubernetesBackend) -> Prepare:
    """Prepare the cases where the application's tools are: `minicluster campaign prepare` in the lead pod (the
    broker bundle the init container copied has it), writing to the shared work directory; then the plan as the
    operator sees it there. The operator's own image needs no OpenFOAM."""

    def prepare(mc: MiniCluster, say: Callable[[str], None]) -> CampaignPlan:
        spec = mc.spec.campaign
        assert spec is not None
        argv = [f"{BROKER_INSTALL_DIR}/bin/minicluster", "campaign", "prepare", "--spec-json"]
        argv.append(mc.model_dump_json(by_alias=True, exclude_none=True))
        result = backend.exec(mc.name, 0, argv, timeout=PREPARE_TIMEOUT)
        for line in result.stdout.splitlines():
            say(line)
        if result.rc != 0:
            why = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise InvalidRequestError(f"preparing the cases in the lead pod failed (exit {result.rc}): {' '.join(why)}")
        plan = plan_campaign(spec, shared_workdir(mc))
        unseen = [e.script for e in plan.ensembles if not e.script.exists()]
        if unseen:
            raise InvalidRequestError(
                f"spec.campaign.workdir: the lead pod prepared the cases, but {unseen[0]} is not there where the "
                "operator runs: mount the same volume at that path in the runner container and in the operator "
                "(minicluster operator install --campaign-volume)"
            )
        return plan

    return prepare


def kubernetes_campaign_starter(
    api: KubeApi,
    prepare: Prepare | None = None,
    backend_for: Callable[[str], KubernetesBackend] | None = None,
    flux: list[str] | None = None,
) -> CampaignStarter:
    """(namespace, MiniCluster, clock, progress) -> its CampaignRunner, the cases prepared in the shared work
    directory, or (given the progress of a campaign another operator ran) found there as that one left them.
    ``prepare`` defaults to `prepare_in_lead` (OpenFOAM in the lead pod); tests pass a lighter one."""

    def start(
        namespace: str, mc: MiniCluster, clock: Callable[[], float], resume: CampaignProgress | None = None
    ) -> CampaignRunner:
        from miniclusters.autoscaling.queue import lead_flux
        from miniclusters.campaign import session

        spec = mc.spec.campaign
        assert spec is not None
        workdir = shared_workdir(mc)
        backend = backend_for(namespace) if backend_for is not None else KubernetesBackend(api=api, namespace=namespace)
        if resume is None:
            plan = (prepare or prepare_in_lead(backend))(mc, lambda _line: None)
            assert plan.workdir == plan_campaign(spec, workdir).workdir
        else:  # the cases and scripts are on the shared volume already: preparing again would wipe them
            plan = plan_campaign(spec, workdir)
            missing = [str(e.script) for e in plan.ensembles if not e.script.exists()]
            if missing:
                raise InvalidRequestError(
                    f"spec.campaign.workdir: cannot resume the campaign, its batch scripts are gone: {missing[0]}"
                )
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
        runner.script_env = script_exports(plan.ensembles[0].script.read_text()) if plan.ensembles else {}
        return runner

    return start
