"""Backends by name: "local" (the default), "podman" and "kubernetes"
(`get_backend("kubernetes", context=..., namespace=...)`).

A backend module is imported only when asked for, so `minicluster validate` never loads the Kubernetes client.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from miniclusters.backends.base import (
    Backend,
    BackendError,
    ClusterStatus,
    ClusterSummary,
    CreateOptions,
    ExecResult,
    InvalidRequestError,
    PodStatus,
    ResizeOutcome,
    ResizeResult,
)

BackendFactory = Callable[..., Backend]

# name -> "module:attribute" (imported lazily) or a factory registered at run time.
_REGISTRY: dict[str, str | BackendFactory] = {
    "kubernetes": "miniclusters.backends.kubernetes.backend:KubernetesBackend",
    "local": "miniclusters.backends.local.backend:LocalBackend",
    "podman": "miniclusters.backends.podman.backend:PodmanBackend",
}
DEFAULT_BACKEND = "local"
"""Used when neither --backend nor $MINICLUSTER_BACKEND chooses: the embedded backend needs no cluster."""


class UnknownBackendError(InvalidRequestError):
    pass


def register_backend(name: str, factory: str | BackendFactory) -> None:
    """Make `name` available; factory is a callable taking keyword options, or "module:attribute"."""
    _REGISTRY[name] = factory


def available_backends() -> list[str]:
    return sorted(_REGISTRY)


def get_backend(name: str, **options: Any) -> Backend:
    """The backend called `name`, constructed with `options` (e.g. context, namespace for kubernetes)."""
    target = _REGISTRY.get(name)
    if target is None:
        raise UnknownBackendError(
            f"backend {name!r} is not available (available: {', '.join(available_backends())}); "
            "choose one with --backend or $MINICLUSTER_BACKEND"
        )
    if isinstance(target, str):
        module_name, _, attribute = target.partition(":")
        target = getattr(importlib.import_module(module_name), attribute)
    return target(**options)


__all__ = [
    "DEFAULT_BACKEND",
    "Backend",
    "BackendError",
    "ClusterStatus",
    "ClusterSummary",
    "CreateOptions",
    "ExecResult",
    "PodStatus",
    "ResizeOutcome",
    "ResizeResult",
    "available_backends",
    "get_backend",
    "register_backend",
]
