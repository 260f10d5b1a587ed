"""The embedded local backend: a MiniCluster's pods as process trees on this machine (namespaces and cgroups as root).

Modules: plan (pure names, addresses, CPU weights), netns, cgroups, process, state, backend (LocalBackend).
"""

from __future__ import annotations

from miniclusters.backends.local.backend import LocalBackend

__all__ = ["LocalBackend"]
