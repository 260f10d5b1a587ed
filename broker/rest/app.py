"""The FastAPI application: Flux RESTful API v1 paths, parameters, response shapes and status codes.

Quirks existing clients rely on are kept: submit parameters may come as a query string, a form or JSON;
an unauthenticated request gets 401 with a `WWW-Authenticate` header naming /v1/token, where a client
exchanges an HS256 handshake JWT (or HTTP Basic credentials) for a bearer access token.

The routes live in routers, one module a concern (auth_api, jobs_api, submit_api, instance_api, users_api,
the pages in broker/rest/web); they reach what they share through the `Rest` dependency (broker/rest/state.py).
This module only builds that state and puts the routers together.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from broker.rest import auth_api, instance_api, jobs_api, submit_api, users_api
from broker.rest.body_guard import BodyLimit, BodyTooLarge
from broker.rest.fast_read import FastJobRead, FrontedFastAPI
from broker.rest.jobs import JobService
from broker.rest.settings import RestSettings
from broker.rest.state import RestState
from broker.rest.users import UserStore
from broker.rest.web import WebContext, mount_web

HOT_ROUTERS = (jobs_api.search_router, submit_api.router, jobs_api.one_job_router)
"""The most asked routes, tried first in this order (hot_routes_first)."""
ROUTERS = (*HOT_ROUTERS, auth_api.router, jobs_api.router, instance_api.router, users_api.router)


def create_app(settings: RestSettings, service: JobService, users: UserStore | None = None) -> FastAPI:
    """One app per lead broker. `service` talks to the instance; `users` is the bcrypt user database.

    Nothing that blocks runs on the event loop. The hot routes (one job, submit) are `async def` and await the
    instance through `asynchronous(service)`: on the built-in broker, an RPC awaited on the loop itself (no
    thread hand-off: broker/rest/async_broker.py says why), on flux-core a call in a worker thread. The other
    routes that call the instance or the user database are plain `def` (FastAPI runs them in its worker
    threads); they authenticate there and return a ready JSONResponse, so a request waits for one thread
    handover, not three."""
    users = users or UserStore(settings.database)
    if settings.superuser:
        users.ensure(settings.superuser, settings.superuser_password, superuser=True)
    rest = RestState(settings, service, users)
    app = FrontedFastAPI(
        title="Flux RESTful API (miniclusters)",
        version="1.0.0",
        description="Submit and watch jobs on a MiniCluster's lead broker; compatible with flux-restful-api v1.",
    )
    _limit_bodies(app, settings.max_body_bytes)
    app.state.rest = rest
    app.state.users, app.state.service, app.state.settings = users, service, settings
    for router in ROUTERS:
        app.include_router(router)
    mount_web(app, web_context(rest))
    hot_routes_first(app, HOT_ROUTERS)
    app.front = functools.partial(FastJobRead, read=rest.read_job_plainly)  # broker/rest/fast_read.py
    return app


def _limit_bodies(app: FastAPI, limit: int) -> None:
    """Refuse a request body over `limit` bytes (413), however it is sent (broker/rest/body_guard.py)."""
    app.add_middleware(BodyLimit, limit=limit)
    app.add_exception_handler(BodyTooLarge, body_too_large)


async def body_too_large(request: Request, exc: Exception) -> JSONResponse:
    """413, as BodyLimit answers it, for a body found too large while a route reads it."""
    rest: RestState = request.app.state.rest
    return BodyLimit(request.app, rest.settings.max_body_bytes).too_large()


def web_context(rest: RestState) -> WebContext:
    """What the pages need: the API's own settings, service, users, authentication and access rule."""
    return WebContext(
        rest.settings,
        rest.service,
        rest.users,
        authenticate=rest.auth.current_user,
        visible=rest.visible,
        submit=rest.submit_as,
        visible_jobs=rest.visible_jobs,
    )


def hot_routes_first(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """Move the included `routers` to the front of the app's routes, in the order given.

    Starlette tries routes in order, a path match each (about 8 us here); FastAPI's documentation routes and
    ours registered before came ahead of a GET of one job, ten tries for every request. The paths moved do
    not overlap with any route moved past (/v1/jobs/search stays ahead of /v1/jobs/{jobid})."""
    routes = app.router.routes
    hot = [route for router in routers for route in routes if getattr(route, "original_router", None) is router]
    routes[:] = hot + [route for route in routes if route not in hot]


AppFactory = Callable[[RestSettings, JobService], FastAPI]
