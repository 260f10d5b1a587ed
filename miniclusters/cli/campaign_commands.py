"""`minicluster up SPEC` for a spec with a campaign, `minicluster campaign status|cancel|results NAME`, and
`minicluster campaign prepare SPEC`.

`up` prepares every member's case, brings the cluster up at spec.size, runs the campaign in the foreground (the
autoscaler and the multiplexer of spec.autoscale / spec.multiplexing act through one plan), prints the results
and the operational report, writes the PNGs, and tears the cluster down unless --keep. Its exit code is 0 only
when every member completed with its coefficients.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

import click

from miniclusters.api.errors import SpecError
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import Backend, CreateOptions, NotFoundError
from miniclusters.campaign.state_file import CampaignState
from miniclusters.cli.campaign_render import print_campaign_state, result_lines
from miniclusters.cli.interrupts import EXIT_INTERRUPTED, TeardownOnInterrupt

EXIT_INVALID = 2


def up_campaign(target: Backend, mc: MiniCluster, options: CreateOptions, keep: bool, timeout: float | None) -> None:
    """The whole campaign in the foreground; exits with its code."""
    from elasticity.workloads.foam import FoamError
    from miniclusters.campaign import session, state_file
    from miniclusters.pidlock import AlreadyRunning

    if target.exists(mc):
        click.echo(f"error: MiniCluster {mc.name} exists; remove it with `minicluster down {mc.name}`", err=True)
        sys.exit(1)
    if not target.ephemeral:  # the operator runs it; up applies the MiniCluster and follows its condition
        from miniclusters.cli.campaign_follow import up_through_operator

        sys.exit(up_through_operator(target, mc, options, keep, timeout, click.echo))
    say: Callable[[str], None] = click.echo
    interactive = mc.model_copy(update={"spec": mc.spec.model_copy(update={"interactive": True})})
    interactive = session.with_shared_workdir(interactive, session.plan_of(mc).workdir)
    try:
        with state_file.exclusive(mc.name):
            try:
                plan = session.prepare(mc, say)
            except SpecError as exc:  # a work directory that is not ours: nothing was written there
                click.echo(str(exc), err=True)
                sys.exit(EXIT_INVALID)
            except (FoamError, FileExistsError, OSError) as exc:
                click.echo(f"error: preparing the cases: {exc}", err=True)
                sys.exit(1)
            code = _run_on_cluster(target, interactive, options, plan, keep, timeout, say)
    except AlreadyRunning as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    sys.exit(code)


def _run_on_cluster(
    target: Backend,
    mc: MiniCluster,
    options: CreateOptions,
    plan: Any,
    keep: bool,
    timeout: float | None,
    say: Callable[[str], None],
) -> int:
    from miniclusters.campaign import session, state_file

    created = False
    with TeardownOnInterrupt(f"cancelling the campaign and tearing down MiniCluster {mc.name}"):
        try:
            status = target.create(mc, options)
            created = True
            say(f"MiniCluster {mc.name} up: size {status.size} (maxSize {mc.spec.effective_max_size})")
            outcome, _runner = session.run(target, mc, plan, say, timeout)
            state = state_file.load_state(mc.name) or {}
            for line in result_lines(state):
                say(line)
            members = state.get("members") or []
            ok = outcome == "done" and members and all(m["state"] == "done" for m in members)
            say(
                f"campaign {outcome}: {sum(1 for m in members if m['state'] == 'done')}/{len(members)} members "
                "completed with Cl/Cd"
            )
            return 0 if ok else 1
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        finally:
            if created and not keep:
                with contextlib.suppress(NotFoundError):
                    target.delete(mc.name)
                say(f"deleted MiniCluster {mc.name}")
            elif created:
                say(f"kept MiniCluster {mc.name} (--keep): remove it with `minicluster down {mc.name}`")


@click.group()
def campaign() -> None:
    """A campaign's progress, results, or its cancellation (spec.campaign; see docs/campaign.md).

    \b
    Example:
      minicluster up examples/naca0012-campaign.yaml       # runs it in the foreground
      minicluster campaign status naca0012-campaign         # from another shell
      minicluster campaign results naca0012-campaign        # the Cl/Cd table, the report and the PNGs
      minicluster campaign cancel naca0012-campaign         # cancels every ensemble, tears the cluster down
    """


def _state_or_exit(name: str) -> CampaignState:
    from miniclusters.campaign import state_file

    state = state_file.load_state(name)
    if state is None:
        click.echo(
            f"error: no campaign has run on MiniCluster {name!r} here (no {state_file.state_path(name)})", err=True
        )
        sys.exit(1)
    return state


@campaign.command()
@click.argument("name")
def status(name: str) -> None:
    """Ensembles and members now: state, pods, iterations, duty cycles; the results once done."""
    print_campaign_state(_state_or_exit(name))


@campaign.command()
@click.argument("name")
def results(name: str) -> None:
    """The Cl/Cd table and the operational report, rebuilt from the work directory (also writes the PNGs)."""
    from miniclusters.campaign import session

    state = _state_or_exit(name)
    summary = session.report(session.plan_from_state(state), name)
    for line in result_lines(summary):  # the report rebuilt now: every field the table prints
        click.echo(line)


@campaign.command()
@click.argument("name")
def cancel(name: str) -> None:
    """Cancel every ensemble (their sub-instances and members) and stop the campaign's `up`."""
    from miniclusters.campaign import state_file

    pid = state_file.stop(name)
    if pid is None:
        click.echo(f"no campaign runs on MiniCluster {name!r}")
        sys.exit(1)
    click.echo(f"cancelled the campaign of {name} (pid {pid})")


@campaign.command()
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--spec-json", hidden=True, help="The MiniCluster as JSON (how the operator passes it into the lead pod)."
)
def prepare(spec_file: str | None, spec_json: str | None) -> None:
    """Prepare the campaign's cases in spec.campaign.workdir without running them: the mesh once, then every
    member's case (decomposed) and each ensemble's batch script, as `up` does first. On Kubernetes the operator
    runs this in the lead pod, where the application's OpenFOAM is.

    \b
    Example:
      minicluster campaign prepare examples/naca0012-campaign.yaml
    """
    import json

    from elasticity.workloads.foam import FoamError
    from miniclusters.api.load import load_minicluster, load_minicluster_file
    from miniclusters.campaign import session

    if (spec_file is None) == (spec_json is None):
        raise click.UsageError("give SPEC_FILE (or, as the operator does, --spec-json), not both")
    try:
        mc = (
            load_minicluster_file(spec_file) if spec_file is not None else load_minicluster(json.loads(spec_json or ""))
        )
    except ValueError as exc:  # SpecError is one; json's decode error too
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INVALID)
    if mc.spec.campaign is None:
        click.echo("error: spec.campaign: the MiniCluster has no campaign to prepare", err=True)
        sys.exit(EXIT_INVALID)
    try:
        session.prepare(mc, click.echo)
    except SpecError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_INVALID)
    except (FoamError, OSError) as exc:
        click.echo(f"error: preparing the cases: {exc}", err=True)
        sys.exit(1)
