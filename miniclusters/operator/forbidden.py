"""What the operator says when RBAC refuses it a call: which verb on which resource, where, and how to grant it.

The API server's 403 names all of it (`User "system:serviceaccount:miniclusters-system:miniclusters-operator"
cannot create resource "jobs" in API group "batch" in the namespace "hpc"`); `refused_verb` reads it back
(pure), and `advice` turns it into one sentence for the operator's log and a Warning Event on the MiniCluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from miniclusters.operator.manifests import NAME

_CANNOT = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)?'
)


@dataclass(frozen=True)
class RefusedVerb:
    user: str
    verb: str
    resource: str
    """The plural, with its subresource when there is one (pods/exec)."""
    group: str
    namespace: str | None

    @property
    def qualified(self) -> str:
        """`jobs.batch`, `pods/exec` (the core group has no suffix), as `kubectl auth can-i` spells it."""
        plural, _, sub = self.resource.partition("/")
        name = f"{plural}.{self.group}" if self.group else plural
        return f"{name}/{sub}" if sub else name


def refused_verb(message: str) -> RefusedVerb | None:
    """The verb and resource a 403's message names; None when it names none (another kind of refusal)."""
    found = _CANNOT.search(message)
    if found is None:
        return None
    return RefusedVerb(
        found["user"], found["verb"], found["resource"], found["group"] or "", found["namespace"] or None
    )


def advice(refused: RefusedVerb) -> str:
    where = f"in namespace {refused.namespace}" if refused.namespace else "at the cluster scope"
    return (
        f"RBAC: the operator ({refused.user}) may not {refused.verb} {refused.qualified} {where}: grant "
        f"'{refused.verb}' on '{refused.qualified}' to the ClusterRole {NAME} (`minicluster operator install` "
        f"applies the rules it needs; check with `kubectl auth can-i {refused.verb} {refused.qualified} "
        f"--as={refused.user}" + (f" -n {refused.namespace}`)" if refused.namespace else "`)")
    )
