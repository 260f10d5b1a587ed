"""The /cluster page: ranks up/down, CPU requested vs in use per pod, the last profile, controller timelines."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse
from starlette.responses import Response

from broker.rest.users import Principal
from broker.rest.web.cluster_data import broker_reader, burst_service_line
from broker.rest.web.context import WebContext
from broker.rest.web.figures import (
    CONTROLLERS,
    broker_trace_dir,
    controller_figure,
    controller_log,
    last_event,
    latest_profile,
)
from broker.rest.web.pages import PageError, render, require_user


def cluster_router(context: WebContext) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    reader = broker_reader(context.service)
    trace_dir = broker_trace_dir(context.service)
    state_dir = context.settings.state_dir

    def values(user: Principal) -> dict[str, Any]:
        if reader is not None:
            rows, nodes = reader.rows(), []
        else:  # an instance without resource.cpu (the flux flavour): the up nodes only
            rows, nodes = [], context.service.nodes()
        controllers = [
            {"name": name, "last": last_event(state_dir, name), "log": str(controller_log(state_dir, name))}
            for name in CONTROLLERS
            if controller_log(state_dir, name).is_file()
        ]
        campaign: list[dict[str, Any]] = []
        if controller_log(state_dir, "campaign").is_file():
            from elasticity.control.events import read_events
            from elasticity.figures.campaign import member_rows

            campaign = member_rows(list(read_events(controller_log(state_dir, "campaign"))))
        jobs = context.visible_jobs(user, False)
        profile = latest_profile(state_dir, jobs, trace_dir)
        requested = sum(r.request_m or 0 for r in rows if r.up)
        used = sum(r.used_m or 0 for r in rows if r.up)
        scale = max([1000, *(r.request_m or 0 for r in rows), *(r.used_m or 0 for r in rows)])
        return {
            "rows": rows,
            "nodes": nodes,
            "controllers": controllers,
            "campaign": campaign,
            "profile": profile,
            "requested": requested,
            "used": used,
            "scale": scale,
            "up": sum(r.up for r in rows) if rows else len(nodes),
            "drained": sum(r.drained is not None for r in rows),
            "burst_service": burst_service_line(context.service),
        }

    @router.get("/cluster")
    def cluster(request: Request) -> Response:
        user = require_user(request, context)
        return render(request, context, "cluster.html", values(user), user)

    @router.get("/cluster/body")
    def cluster_body(request: Request) -> Response:
        user = require_user(request, context, fragment=True)
        return render(request, context, "_cluster_body.html", values(user), user)

    @router.get("/cluster/figures/{name}.png")
    def controller_png(request: Request, name: str) -> Response:
        require_user(request, context)
        png = controller_figure(state_dir, name)
        if png is None:
            raise PageError(404, f"No {name} controller has written an event log here.")
        return FileResponse(png, media_type="image/png", headers={"Cache-Control": "no-store"})

    @router.get("/cluster/profile/{jobid}.png")
    def profile_png(request: Request, jobid: str) -> Response:
        user = require_user(request, context)
        jobs = context.visible_jobs(user, False)
        profile = latest_profile(state_dir, jobs, trace_dir)
        if profile is None or jobid not in (profile.job.f58, str(profile.job.id)):
            raise PageError(404, f"There is no profile of job {jobid} to show.")
        return FileResponse(profile.figure, media_type="image/png", headers={"Cache-Control": "no-store"})

    return router
