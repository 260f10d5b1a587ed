"""Signing in and out of the pages: the login form, its post (bcrypt, in a worker thread), logout."""

# No `from __future__ import annotations`: FastAPI reads the parameters' annotations at runtime.

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.responses import Response

from broker.rest.web.context import Web, WebContext
from broker.rest.web.pages import render
from broker.rest.web.session import CSRF_FIELD, check_csrf, clear_session, issue_session, safe_next, set_session

Text = Annotated[str, Query(max_length=200)]

router = APIRouter(include_in_schema=False)


@router.get("/")
def home() -> Response:
    return RedirectResponse("/jobs", status_code=303)


@router.get("/login")
def login_form(request: Request, context: Web, next: Text = "/jobs") -> Response:
    if not context.settings.require_auth:
        return RedirectResponse(safe_next(next), status_code=303)
    return render(request, context, "login.html", {"next": safe_next(next), "error": ""})


@router.post("/login")
async def login(request: Request, context: Web) -> Response:
    form = await request.form()
    return await run_in_threadpool(_login_posted, request, context, form)  # bcrypt takes a quarter of a second


def _login_posted(request: Request, context: WebContext, form: FormData) -> Response:
    check_csrf(request, form.get(CSRF_FIELD))
    target = safe_next(str(form.get("next") or ""))
    if not context.settings.require_auth:
        return RedirectResponse(target, status_code=303)
    name, password = form.get("username"), form.get("password")
    principal = None
    if isinstance(name, str) and isinstance(password, str) and name:
        principal = context.users.authenticate(name, password)
    if principal is None:
        values = {"next": target, "error": "Incorrect user name or password.", "username": name or ""}
        return render(request, context, "login.html", values, status=400)
    response = RedirectResponse(target, status_code=303)
    set_session(response, request, issue_session(context, principal), context.settings.token_minutes)
    return response


@router.post("/logout")
async def logout(request: Request, context: Web) -> Response:
    check_csrf(request, (await request.form()).get(CSRF_FIELD))
    response = RedirectResponse("/login" if context.settings.require_auth else "/jobs", status_code=303)
    clear_session(response)
    return response
