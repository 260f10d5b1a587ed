"""An in-memory Kubernetes API server for tests: the KubeApi interface, the rules we depend on, and just enough
of the Job controller and the kubelet to see pods come, go and resize.

Every rule enforced here cites the Kubernetes documentation it comes from. Every object the client sends is
validated against the official schemas of the real server's version (kubernetes-validate, strict; an unknown field
is dropped with a warning, as the real server does); our custom resources are validated against the CRD we
generate. tests/kubernetes runs the tests of these rules against a real server too (miniclusters/testing/
kube_sides.py). Nothing here is used outside tests.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from miniclusters.api.quantity import cpu_millicores
from miniclusters.backends.base import ExecResult
from miniclusters.backends.kubernetes.api import (
    FLUX_MINICLUSTER,
    MINICLUSTER,
    POD,
    SERVICE,
    ApiError,
    Kind,
    PatchType,
    WatchEvent,
    kind_of,
)
from miniclusters.kube_shapes import AnyObject, KubeObject, Pod
from miniclusters.render.layout import INDEX_LABEL
from miniclusters.testing.fake_exec import check_exec, default_exec
from miniclusters.testing.fake_merge import apply_merge, merge_patch, overwrite, selector_matches, strategic_merge
from miniclusters.testing.fake_objects import (
    check_version,
    missing,
    no_field_manager,
    resized_spec,
    scale_of,
    scaled,
    server_defaults,
    unconditional_update_refused,
    without_status,
)
from miniclusters.testing.fake_requests import (
    Authorizer,
    Fault,
    RecordedCall,
    Request,
    check_request,
    served_resources,
)
from miniclusters.testing.fake_watch import EventLog
from miniclusters.testing.kube_controllers import Controllers, KubeletMode
from miniclusters.testing.kube_rules import (
    check_update,
    validate_object,
)


@dataclass
class FakeKube(Controllers):
    """The KubeApi protocol in memory. Controllers run synchronously after every successful write."""

    namespace: str = "default"
    node_cpu: str = "16"
    """Allocatable CPU of the single simulated node (for resize Deferred / Infeasible decisions)."""
    kubelet: KubeletMode = "auto"
    """How the kubelet answers resizes: auto decides from node capacity; the others force an outcome."""
    start_pods: bool = True
    """Whether the kubelet starts pods (Pending -> Running); False keeps them Pending."""
    crd_installed: bool = True
    flux_crd_installed: bool = False
    forbidden: set[tuple[str, str]] = field(default_factory=set)
    """(verb, plural) pairs that RBAC denies, e.g. ("create", "jobs")."""
    validate: bool = True
    authorizer: Authorizer | None = None
    """RBAC for the client: (verb, apiGroup, resource[/subresource], namespace or None, name) -> allowed;
    e.g. fake_rbac.RbacAuthorizer(...).allowed over rendered Roles and bindings. None: everything is allowed."""
    exec_handler: Callable[[FakeKube, Pod, list[str]], ExecResult] | None = None
    objects: dict[tuple[str, str, str], KubeObject] = field(default_factory=dict)
    calls: list[RecordedCall] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    pod_logs: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """What the server warned about (the Warning header): unknown fields it dropped, as `unknown field "x.y"`."""
    _events: EventLog = field(default_factory=EventLog)
    _rv: int = 100
    _uid: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _before_write: list[Callable[[FakeKube], None]] = field(default_factory=list)
    _clock: itertools.count[int] = field(default_factory=lambda: itertools.count(0))

    # ------------------------------------------------------------------ test controls
    def fail(
        self, verb: str, status: int, kind: Kind | None = None, count: int = 1, subresource: str | None = "*"
    ) -> None:
        """Inject `count` failures (429 throttling per API priority and fairness, 5xx server errors, ...)."""
        self.faults.append(Fault(verb, status, kind, count, subresource))

    def before_next_write(self, callback: Callable[[FakeKube], None]) -> None:
        """Run callback just before the next write lands: a concurrent writer racing the client."""
        self._before_write.append(callback)

    def compact(self) -> None:
        """Forget watch history, so older resourceVersions answer 410 Gone (see DOCS_WATCH)."""
        self._events.compacted = self._rv

    def stored(self, kind: Kind, name: str, namespace: str | None = None) -> KubeObject:
        return self.objects[(self._key(kind), self._ns(kind, namespace), name)]

    def all_of(self, kind: Kind, namespace: str | None = None) -> list[KubeObject]:
        key = self._key(kind)
        return [
            o
            for (k, ns, _), o in sorted(self.objects.items())
            if k == key and (namespace is None or ns == namespace or not kind.namespaced)
        ]

    def pods_of(self, job: str, namespace: str | None = None) -> dict[int, Pod]:
        out = {}
        for pod in cast("list[Pod]", self.all_of(POD, namespace or self.namespace)):  # stored pods, read as pods
            if pod["metadata"].get("labels", {}).get("job-name") == job:
                out[int(pod["metadata"]["labels"][INDEX_LABEL])] = pod
        return out

    def writes(self) -> list[RecordedCall]:
        return [c for c in self.calls if c.verb in ("create", "apply", "patch", "update", "delete")]

    @staticmethod
    def _key(kind: Kind) -> str:
        return f"{kind.api_version}/{kind.kind}"

    def _ns(self, kind: Kind, namespace: str | None) -> str:
        return (namespace or self.namespace) if kind.namespaced else ""

    def _now(self) -> str:
        second = next(self._clock)
        return f"2025-01-01T{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"

    def _record(
        self,
        verb: str,
        kind: Kind,
        namespace: str | None,
        name: str | None,
        subresource: str | None = None,
        body: Any = None,
    ) -> None:
        """Record the call, then refuse it as the server would (fake_requests.check_request)."""
        self.calls.append(RecordedCall(verb, kind.kind, namespace, name, subresource, copy.deepcopy(body)))
        scope = namespace if verb in ("list", "watch") else self._ns(kind, namespace) or None
        check_request(Request(verb, kind, namespace, name, subresource, scope), self)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _touch(self, obj: AnyObject, event: str) -> None:
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._events.add(self._rv, event, self._key(kind_of(obj)), obj)

    def _lookup(self, kind: Kind, namespace: str | None, name: str) -> KubeObject:
        obj = self.objects.get((self._key(kind), self._ns(kind, namespace), name))
        if obj is None:
            raise missing(kind, name)
        return obj

    def _validated(self, obj: KubeObject, how: Literal["create", "patch", "apply"] = "create") -> KubeObject:
        stored, warnings = validate_object(obj, how)
        self.warnings.extend(warnings)
        return stored

    def _run_before_write(self) -> None:
        hooks, self._before_write = self._before_write, []
        for hook in hooks:
            hook(self)

    # ------------------------------------------------------------------ KubeApi: reads
    def get(self, kind: Kind, namespace: str | None, name: str) -> KubeObject:
        self._record("get", kind, namespace, name)
        return copy.deepcopy(self._lookup(kind, namespace, name))

    def list_objects(
        self, kind: Kind, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[KubeObject], str]:
        self._record("list", kind, namespace, None)
        items = [
            copy.deepcopy(o)
            for o in self.all_of(kind, namespace)
            if selector_matches(o["metadata"].get("labels", {}), label_selector)
        ]
        return items, str(self._rv)

    def watch(
        self,
        kind: Kind,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int = 60,
        label_selector: str | None = None,
    ) -> Iterator[WatchEvent]:
        """Events after resource_version as they happen, until ``timeout_seconds`` pass (0: only those already
        recorded). A real watch stays open until its timeout (DOCS_WATCH); one that returned at once would make
        a watching thread spin, taking the interpreter from every other thread."""
        self._record("watch", kind, namespace, None)
        since = int(resource_version or 0)
        yield from self._events.watch(kind, self._key(kind), namespace, since, timeout_seconds, label_selector)

    def served_resources(self, api_version: str) -> set[str]:
        return served_resources(api_version, self)

    # ------------------------------------------------------------------ KubeApi: writes
    def create(self, obj: KubeObject) -> KubeObject:
        kind = kind_of(obj)
        meta = obj.get("metadata", {})
        self._record("create", kind, meta.get("namespace"), meta.get("name"), body=obj)
        self._run_before_write()
        if self.validate:
            obj = self._validated(obj)
        key = (self._key(kind), self._ns(kind, meta.get("namespace")), meta["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f'{kind.plural} "{meta["name"]}" already exists')
        return copy.deepcopy(self._insert(kind, obj))

    def _insert(self, kind: Kind, obj: KubeObject) -> KubeObject:
        stored = copy.deepcopy(obj)
        stored.pop("status", None)
        meta = stored["metadata"]
        meta.pop("resourceVersion", None)
        if kind.namespaced:
            meta["namespace"] = meta.get("namespace") or self.namespace
        meta["uid"] = f"uid-{next(self._uid):04d}"
        meta["creationTimestamp"] = self._now()
        meta["generation"] = 1
        services = [o for (k, _, _), o in self.objects.items() if k == self._key(SERVICE)]
        server_defaults(kind, stored, services)
        self.objects[(self._key(kind), self._ns(kind, meta.get("namespace")), meta["name"])] = stored
        self._touch(stored, "ADDED")
        self.run_controllers()
        return stored

    def apply(self, obj: KubeObject, field_manager: str, force: bool = True) -> KubeObject:
        kind = kind_of(obj)
        meta = obj.get("metadata", {})
        self._record("apply", kind, meta.get("namespace"), meta.get("name"), body=obj)
        self._run_before_write()
        if not field_manager:
            raise no_field_manager()
        if self.validate:
            obj = self._validated(obj, "apply")
        key = (self._key(kind), self._ns(kind, meta.get("namespace")), meta["name"])
        current = self.objects.get(key)
        if current is None:
            # Server-side apply creates the object when it does not exist.
            return copy.deepcopy(self._insert(kind, obj))
        check_version(kind, current["metadata"], obj.get("metadata"))
        applied = without_status(obj)
        return copy.deepcopy(self._update(kind, current, apply_merge(current, applied)))

    def _update(
        self,
        kind: Kind,
        current: KubeObject,
        new: KubeObject,
        status_only: bool = False,
    ) -> KubeObject:
        if status_only:
            merged = copy.deepcopy(current)
            merged["status"] = copy.deepcopy(new.get("status", {}))
        else:
            merged = copy.deepcopy(new)
            merged["status"] = copy.deepcopy(current.get("status", {}))
            check_update(kind, current, merged)
            for server_field in ("uid", "creationTimestamp", "generation", "namespace", "name"):
                if server_field in current["metadata"]:
                    merged["metadata"][server_field] = current["metadata"][server_field]
            if merged.get("spec") != current.get("spec"):
                merged["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        if merged == current:
            return current  # a no-op write does not change resourceVersion
        overwrite(current, merged)
        self._touch(current, "MODIFIED")
        self.run_controllers()
        return current

    def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        body: Any,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject:
        self._record("patch", kind, namespace, name, subresource, body)
        self._run_before_write()
        current = self._lookup(kind, namespace, name)
        if patch_type == "json":
            raise ApiError(415, "UnsupportedMediaType", "the fake serves merge and strategic merge patches only")
        if patch_type == "strategic" and kind in (MINICLUSTER, FLUX_MINICLUSTER):
            # Custom resources do not support strategic merge patch (the real server's words, v1.37.2).
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            )
        check_version(kind, current["metadata"], body.get("metadata") if isinstance(body, dict) else None)
        if subresource == "scale":
            return self._patch_scale(kind, current, body)
        merge = strategic_merge if patch_type == "strategic" else merge_patch
        new = merge(current, body)
        if subresource not in (None, "status", "resize") or (subresource == "resize" and kind != POD):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if self.validate and subresource != "status":
            checked = self._validated(without_status(new), "patch")
            new = {**checked, "status": new["status"]} if "status" in new else checked
        if subresource == "resize":
            pod = cast(Pod, current)  # the stored pod, as the resize reads and writes it
            pod["spec"] = resized_spec(pod, new, self.kubelet == "auto", cpu_millicores(self.node_cpu))
            self._touch(current, "MODIFIED")
            self.run_controllers()
            return copy.deepcopy(current)
        return copy.deepcopy(self._update(kind, current, new, status_only=subresource == "status"))

    def _patch_scale(self, kind: Kind, current: KubeObject, body: Any) -> KubeObject:
        new = scaled(kind, current, body)
        if self.validate:  # the CRD's schema holds (real server, v1.37.2: replicas 0 -> 422, spec.size minimum 1)
            validate_object(without_status(new))
        self._update(kind, current, new)
        return scale_of(current)

    scale_of = staticmethod(scale_of)

    def replace(self, obj: KubeObject, subresource: str | None = None) -> KubeObject:
        kind = kind_of(obj)
        meta = obj["metadata"]
        self._record("update", kind, meta.get("namespace"), meta["name"], subresource, obj)
        self._run_before_write()
        current = self._lookup(kind, meta.get("namespace"), meta["name"])
        if not meta.get("resourceVersion") and kind in (MINICLUSTER, FLUX_MINICLUSTER):
            raise unconditional_update_refused(kind, meta["name"])
        check_version(kind, current["metadata"], obj["metadata"])
        if subresource not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if self.validate and (subresource is None or kind in (MINICLUSTER, FLUX_MINICLUSTER)):
            if subresource:
                obj = self._validated(obj)
            else:
                checked = self._validated(without_status(obj))
                obj = {**checked, "status": obj["status"]} if "status" in obj else checked
        return copy.deepcopy(self._update(kind, current, obj, status_only=subresource == "status"))

    def delete(self, kind: Kind, namespace: str | None, name: str, propagation: str = "Background") -> None:
        self._record("delete", kind, namespace, name)
        self._run_before_write()
        obj = self._lookup(kind, namespace, name)
        self._remove(obj)
        self.run_controllers()

    def _remove(self, obj: AnyObject) -> None:
        kind = kind_of(obj)
        meta = obj["metadata"]
        self.objects.pop((self._key(kind), self._ns(kind, meta.get("namespace")), meta["name"]), None)
        self._touch(obj, "DELETED")
        # Garbage collection: dependents whose ownerReferences name the deleted owner go too (DOCS_GC).
        for dependent in list(self.objects.values()):
            owners = dependent["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == meta["uid"] for ref in owners):
                self._remove(dependent)

    # ------------------------------------------------------------------ KubeApi: pods
    def exec(
        self, namespace: str, pod: str, container: str | None, argv: list[str], timeout: float = 60.0
    ) -> ExecResult:
        self._record("exec", POD, namespace, pod, "exec", argv)
        obj = cast(Pod, self._lookup(POD, namespace, pod))  # the stored pod, as the exec reads it
        check_exec(pod, obj["status"])
        handler = self.exec_handler or default_exec
        return handler(self, obj, argv)

    def logs(self, namespace: str, pod: str, container: str | None, follow: bool = False) -> Iterator[str]:
        self._record("logs", POD, namespace, pod, "log")
        self._lookup(POD, namespace, pod)
        yield from list(self.pod_logs.get(pod, []))
