"""User management over REST: POST /v1/users, GET /v1/users, DELETE /v1/users/{name} (superuser only) and
PUT /v1/users/{name}/password (a user's own, or anyone's as a superuser).

The body is read and validated here rather than by FastAPI, so that bad input is a 400 whose every error names
its field, as at submit (FastAPI would answer 422). Passwords travel only in the request body (never a URL),
are never echoed in an answer and never logged; a removed, re-added or re-passworded user's old tokens stop
working (broker/rest/users.py).
"""

# No `from __future__ import annotations`: FastAPI reads the dependencies from the annotations at runtime.

from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from broker.rest.json_types import Responses
from broker.rest.messages import error_lines
from broker.rest.schemas import PROTECTED, Detail, Invalid
from broker.rest.state import Rest, RestState, User
from broker.rest.users import MAX_NAME_CHARS, MAX_PASSWORD_BYTES, NAME_RULE, Principal, UserError, check_name


class NewUser(BaseModel):
    """POST /v1/users: who to add (strict: a number is not a name, 1 is not true)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(description=NAME_RULE, max_length=MAX_NAME_CHARS)
    password: str = Field(description=f"1-{MAX_PASSWORD_BYTES} bytes of UTF-8", max_length=1000)
    superuser: bool = Field(False, description="may manage users and see every job")


class NewPassword(BaseModel):
    """PUT /v1/users/{name}/password."""

    model_config = ConfigDict(extra="forbid", strict=True)

    password: str = Field(description=f"1-{MAX_PASSWORD_BYTES} bytes of UTF-8", max_length=1000)


class UserRecord(BaseModel):
    name: str
    superuser: bool


class UserAdded(UserRecord):
    Message: str
    mode: str = Field(description="the server's mode: users are isolated from each other only in multi-user")


class UserList(BaseModel):
    users: list[UserRecord]
    mode: str = Field(description="the server's mode: users are isolated from each other only in multi-user")


class UserRemoved(BaseModel):
    Message: str
    name: str


class PasswordChanged(BaseModel):
    Message: str
    name: str


FORBIDDEN: Responses = {403: {"model": Detail, "description": "the caller is not a superuser"}}


def _invalid(errors: list[str]) -> JSONResponse:
    return JSONResponse({"Message": "Invalid user request", "Errors": errors}, status_code=400)


def _error_lines(exc: ValidationError) -> list[str]:
    return error_lines(exc.errors(include_url=False), {"extra_forbidden": "unknown field"})


Body = TypeVar("Body", bound=BaseModel)


async def _parsed(request: Request, model: type[Body], shape: str) -> Body | JSONResponse:
    """The request's JSON object validated as `model`, or the 400 answer saying what is wrong with the body
    (the open JSON object is validated here, where it enters, so nothing past this holds it)."""
    if "application/json" not in request.headers.get("content-type", ""):
        return _invalid([f"body: send a JSON object {shape} (application/json)"])
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        return _invalid(["body: not valid JSON"])
    if not isinstance(body, dict):
        return _invalid([f"body: must be a JSON object {shape}"])
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        return _invalid(_error_lines(exc))


router = APIRouter(prefix="/v1/users", tags=["users"])


def superuser(user: User) -> Principal:
    """The caller, when a superuser; else 403 (after authentication's 401)."""
    if not user.is_superuser:
        raise HTTPException(403, "only a superuser may manage users")
    return user


Admin = Annotated[Principal, Depends(superuser)]


@router.post(
    "",
    status_code=201,
    response_model=UserAdded,
    responses={
        **PROTECTED,
        **FORBIDDEN,
        400: {"model": Invalid, "description": "invalid name or password; each error names its field"},
        409: {"model": Detail, "description": "a user with that name exists"},
    },
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": NewUser.model_json_schema()}}}
    },
)
async def add_user(request: Request, admin: Admin, rest: Rest) -> JSONResponse:
    """Add a user (superuser only). Body: {"name", "password", "superuser"}."""
    new = await _parsed(request, NewUser, "{name, password, superuser}")
    if isinstance(new, JSONResponse):
        return new
    return await run_in_threadpool(_add_validated, rest, new)  # bcrypt: a quarter of a second, off the event loop


def _add_validated(rest: RestState, new: NewUser) -> JSONResponse:
    try:
        rest.users.add(new.name, new.password, superuser=new.superuser)
    except UserError as exc:
        if exc.reason == "exists":
            raise HTTPException(409, str(exc)) from None
        return _invalid([str(exc)])
    mode = rest.settings.mode
    added = UserAdded(Message=f"User {new.name} added.", name=new.name, superuser=new.superuser, mode=mode)
    return JSONResponse(added.model_dump(), status_code=201)


@router.get("", response_model=UserList, responses={**PROTECTED, **FORBIDDEN})
def list_users(admin: Admin, rest: Rest) -> UserList:
    """Every user and whether they are a superuser (superuser only); never a password or its hash."""
    records = [UserRecord(name=p.name, superuser=p.is_superuser) for p in rest.users.principals()]
    return UserList(users=records, mode=rest.settings.mode)


@router.delete(
    "/{name}",
    response_model=UserRemoved,
    responses={
        **PROTECTED,
        **FORBIDDEN,
        400: {"model": Detail, "description": "not a valid user name"},
        404: {"model": Detail, "description": "no such user"},
        409: {"model": Detail, "description": "the caller's own account, or the configured superuser"},
    },
)
def remove_user(name: str, admin: Admin, rest: Rest) -> UserRemoved:
    """Remove a user (superuser only); every token issued to them stops working at once."""
    try:
        check_name(name)
    except UserError as exc:
        raise HTTPException(400, str(exc)) from None
    if name == admin.name:
        raise HTTPException(409, f"name: {name!r} is your own account; another superuser must remove it")
    if name == rest.settings.superuser:
        raise HTTPException(
            409, f"name: {name!r} is the configured superuser (FLUX_USER); it is recreated at every start"
        )
    try:
        rest.users.remove(name)
    except UserError as exc:
        raise HTTPException(404, str(exc)) from None
    return UserRemoved(Message=f"User {name} removed; their tokens no longer work.", name=name)


@router.put(
    "/{name}/password",
    response_model=PasswordChanged,
    responses={
        **PROTECTED,
        400: {"model": Invalid, "description": "invalid name or password; each error names its field"},
        403: {"model": Detail, "description": "another user's password, and the caller is not a superuser"},
        404: {"model": Detail, "description": "no such user"},
        409: {"model": Detail, "description": "the configured superuser, whose password FLUX_TOKEN sets"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": NewPassword.model_json_schema()}},
        }
    },
)
async def change_password(name: str, request: Request, user: User, rest: Rest) -> PasswordChanged | JSONResponse:
    """Set a new password (your own, or anyone's as a superuser); every token issued before stops working."""
    try:
        check_name(name)
    except UserError as exc:
        return _invalid([str(exc)])
    if name != user.name and not user.is_superuser:
        raise HTTPException(403, "only a superuser may change another user's password")
    if name == rest.settings.superuser:
        raise HTTPException(
            409, f"name: {name!r} is the configured superuser; FLUX_TOKEN sets its password at every start"
        )
    new = await _parsed(request, NewPassword, "{password}")
    if isinstance(new, JSONResponse):
        return new
    return await run_in_threadpool(_set_validated, rest, name, new)


def _set_validated(rest: RestState, name: str, new: NewPassword) -> PasswordChanged | JSONResponse:
    try:
        rest.users.set_password(name, new.password)
    except UserError as exc:
        if exc.reason == "missing":
            raise HTTPException(404, str(exc)) from None
        return _invalid([str(exc)])
    return PasswordChanged(Message=f"Password of {name} changed; tokens issued before no longer work.", name=name)
