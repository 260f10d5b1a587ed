"""The embedded local backend: a MiniCluster's pods as process trees on this machine (namespaces and cgroups as root).

Modules: plan (pure names, addresses, CPU weights), netns, cgroups, process, state, backend (LocalBackend).
`LocalBackend` is imported on first use, so reading a state file (`minicluster status` reads several) does not load
the whole backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from miniclusters.backends.local.backend import LocalBackend

__all__ = ["LocalBackend"]


def __getattr__(name: str) -> Any:
    if name == "LocalBackend":
        from miniclusters.backends.local.backend import LocalBackend

        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
