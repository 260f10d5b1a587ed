"""What the fake API server checks of every request before it serves it: RBAC (the authorizer and the forbidden
pairs), injected faults, and whether our CRDs are installed; and the records of the calls it was sent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from miniclusters.backends.kubernetes.api import FLUX_MINICLUSTER, KINDS, MINICLUSTER, ApiError, Kind

Verb = Literal["get", "list", "watch", "create", "apply", "patch", "update", "delete", "exec", "logs"]
Authorizer = Callable[[str, str, str, str | None, str | None], bool]
"""(verb, apiGroup, resource[/subresource], namespace or None, name) -> allowed."""

# 429: API priority and fairness rejects excess requests (DOCS_APF); 5xx: transient server errors that clients
# retry with back-off (DOCS_STATUS_CODES).
FAULT_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


@dataclass
class Fault:
    """An injected failure: the next `count` calls of `verb` (on `kind`, any if None) fail with `status`."""

    verb: str
    status: int
    kind: Kind | None = None
    count: int = 1
    subresource: str | None = "*"

    def matches(self, verb: str, kind: Kind, subresource: str | None) -> bool:
        if self.count <= 0 or self.verb not in (verb, "*"):
            return False
        if self.kind is not None and self.kind != kind:
            return False
        return self.subresource == "*" or self.subresource == subresource


@dataclass
class RecordedCall:
    verb: str
    kind: str
    namespace: str | None
    name: str | None
    subresource: str | None = None
    body: Any = None  # open: whatever the client sent (an object, a patch, an argv)


class RequestRules(Protocol):
    """The parts of the fake that decide whether a request is served (FakeKube's fields)."""

    authorizer: Authorizer | None
    forbidden: set[tuple[str, str]]
    faults: list[Fault]
    crd_installed: bool
    flux_crd_installed: bool


@dataclass(frozen=True)
class Request:
    verb: str
    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None
    scope: str | None
    """The namespace RBAC weighs: the one asked for by a list or watch, the object's own otherwise."""


def check_request(request: Request, rules: RequestRules) -> None:
    """ApiError unless the request is served: 403 from RBAC, an injected fault, 404 for a CRD not installed."""
    _check_rbac(request, rules)
    for fault in rules.faults:
        if fault.matches(request.verb, request.kind, request.subresource):
            fault.count -= 1
            reason = FAULT_REASONS.get(fault.status, "Error")
            raise ApiError(fault.status, reason, f"injected {fault.status} for {request.verb}")
    kind = request.kind
    if (kind == MINICLUSTER and not rules.crd_installed) or (kind == FLUX_MINICLUSTER and not rules.flux_crd_installed):
        raise ApiError(404, "NotFound", "the server could not find the requested resource")


def _check_rbac(request: Request, rules: RequestRules) -> None:
    kind = request.kind
    rbac_verb = {"apply": "patch"}.get(request.verb, request.verb)
    resource = kind.plural + (f"/{request.subresource}" if request.subresource else "")
    authz_verb = {"exec": "create", "logs": "get"}.get(rbac_verb, rbac_verb)  # pods/exec, pods/log
    authorizer = rules.authorizer
    denied = authorizer is not None and not authorizer(authz_verb, kind.group, resource, request.scope, request.name)
    if denied or (rbac_verb, resource) in rules.forbidden or (rbac_verb, kind.plural) in rules.forbidden:
        raise ApiError(
            403,
            "Forbidden",
            f'{kind.plural} is forbidden: User "system:serviceaccount:test:client" cannot {rbac_verb} '
            f'resource "{resource}" in API group "{kind.group}" in the namespace "{request.namespace}"',
        )


def served_resources(api_version: str, rules: RequestRules) -> set[str]:
    """Discovery: the resources `api_version` serves (our CRDs' only while installed), or 404."""
    served = {kind.api_version for kind in KINDS if kind not in (MINICLUSTER, FLUX_MINICLUSTER)}
    if rules.crd_installed:
        served.add(MINICLUSTER.api_version)
    if rules.flux_crd_installed:
        served.add(FLUX_MINICLUSTER.api_version)
    if api_version not in served:
        # what RealKubeApi makes of the real server's plain-text 404 for a group/version it does not serve
        raise ApiError(404, "Error", "404 page not found")
    plurals = {k.plural for k in KINDS if k.api_version == api_version}
    return plurals | {f"{p}/{s}" for p in plurals for s in ("status", "scale") if p == "miniclusters"}
