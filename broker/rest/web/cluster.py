"""The /cluster page: ranks up/down, CPU requested vs in use per pod, the last profile, controller timelines."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from broker.rest.web.context import WebContext
from broker.rest.web.pages import render, require_user


def cluster_router(context: WebContext) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/cluster")
    def cluster(request: Request) -> Response:
        user = require_user(request, context)
        return render(request, context, "cluster.html", {"nodes": context.service.nodes()}, user)

    return router
