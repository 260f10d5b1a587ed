"""The /cluster page: ranks up/down, CPU requested vs in use per pod, the last profile, controller timelines."""

# No `from __future__ import annotations`: FastAPI reads the parameters' annotations at runtime.

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypedDict, cast

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse
from starlette.responses import Response

from broker.rest.users import Principal
from broker.rest.web.cluster_data import ClusterReader, RankRow, broker_reader, burst_service_line
from broker.rest.web.context import Web, WebContext
from broker.rest.web.figures import (
    CONTROLLERS,
    Profile,
    TraceDir,
    broker_trace_dir,
    controller_figure,
    controller_log,
    last_event,
    latest_profile,
)
from broker.rest.web.pages import PageError, render, require_user

if TYPE_CHECKING:
    from elasticity.control.events import EventRecord
    from elasticity.figures.campaign import MemberRow

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class ClusterSources:
    """Where the page reads from, made once per app: `reader` keeps each rank's last CPU report between page
    loads (None without resource.cpu: the flux flavour), `trace_dir` remembers where each job's traces are."""

    reader: ClusterReader | None
    trace_dir: TraceDir
    state_dir: Path

    @classmethod
    def of(cls, context: WebContext) -> "ClusterSources":
        service = context.service
        return cls(broker_reader(service), broker_trace_dir(service), context.settings.state_dir)


async def cluster_sources(request: Request) -> ClusterSources:
    """The app's ClusterSources (a dependency; mount_web keeps them at `app.state.cluster`)."""
    sources: ClusterSources = request.app.state.cluster
    return sources


Sources = Annotated[ClusterSources, Depends(cluster_sources)]


class Controller(TypedDict):
    name: str
    last: "EventRecord | None"
    log: str


class ClusterValues(TypedDict):
    """What cluster.html and _cluster_body.html show."""

    rows: list[RankRow]
    nodes: list[str]
    controllers: list[Controller]
    campaign: "list[MemberRow]"
    profile: Profile | None
    requested: int
    used: int
    scale: int
    up: int
    drained: int
    burst_service: str | None


def _controllers(state_dir: Path) -> list[Controller]:
    return [
        Controller(name=name, last=last_event(state_dir, name), log=str(controller_log(state_dir, name)))
        for name in CONTROLLERS
        if controller_log(state_dir, name).is_file()
    ]


def _campaign(state_dir: Path) -> "list[MemberRow]":
    if not controller_log(state_dir, "campaign").is_file():
        return []
    from elasticity.control.events import read_events
    from elasticity.figures.campaign import member_rows

    rows = member_rows(list(read_events(controller_log(state_dir, "campaign"))))
    return cast("list[MemberRow]", rows)  # member_rows makes MemberRows (it answers plain dicts)


def values(context: WebContext, sources: ClusterSources, user: Principal) -> ClusterValues:
    if sources.reader is not None:
        rows, nodes = sources.reader.rows(), []
    else:  # an instance without resource.cpu (the flux flavour): the up nodes only
        rows, nodes = [], context.service.nodes()
    controllers = _controllers(sources.state_dir)
    campaign = _campaign(sources.state_dir)
    profile = latest_profile(sources.state_dir, context.visible_jobs(user, False), sources.trace_dir)
    return ClusterValues(
        rows=rows,
        nodes=nodes,
        controllers=controllers,
        campaign=campaign,
        profile=profile,
        requested=sum(r.request_m or 0 for r in rows if r.up),
        used=sum(r.used_m or 0 for r in rows if r.up),
        scale=max([1000, *(r.request_m or 0 for r in rows), *(r.used_m or 0 for r in rows)]),
        up=sum(r.up for r in rows) if rows else len(nodes),
        drained=sum(r.drained is not None for r in rows),
        burst_service=burst_service_line(context.service),
    )


@router.get("/cluster")
def cluster(request: Request, context: Web, sources: Sources) -> Response:
    user = require_user(request, context)
    return render(request, context, "cluster.html", {**values(context, sources, user)}, user)


@router.get("/cluster/body")
def cluster_body(request: Request, context: Web, sources: Sources) -> Response:
    user = require_user(request, context, fragment=True)
    return render(request, context, "_cluster_body.html", {**values(context, sources, user)}, user)


@router.get("/cluster/figures/{name}.png")
def controller_png(request: Request, name: str, context: Web, sources: Sources) -> Response:
    require_user(request, context)
    png = controller_figure(sources.state_dir, name)
    if png is None:
        raise PageError(404, f"No {name} controller has written an event log here.")
    return FileResponse(png, media_type="image/png", headers={"Cache-Control": "no-store"})


@router.get("/cluster/profile/{jobid}.png")
def profile_png(request: Request, jobid: str, context: Web, sources: Sources) -> Response:
    user = require_user(request, context)
    profile = latest_profile(sources.state_dir, context.visible_jobs(user, False), sources.trace_dir)
    if profile is None or jobid not in (profile.job.f58, str(profile.job.id)):
        raise PageError(404, f"There is no profile of job {jobid} to show.")
    return FileResponse(profile.figure, media_type="image/png", headers={"Cache-Control": "no-store"})
