"""Where the local backend finds real flux-core for the `flux` flavour: its stand-in for the flux-view mount.

On Kubernetes the Flux Operator's flux-view init container copies a Flux install to `/mnt/flux/view`; here the
same entrypoint gets an installed prefix instead. Looked for, in order: $FLUX_CORE_PREFIX, a real flux-core
`flux` on PATH (ours is a Python console script and is passed over), and the prefix `make flux-core` builds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from miniclusters.errors import MiniclustersError

PREFIX_ENV = "FLUX_CORE_PREFIX"
CACHE_ENV = "FLUX_CORE_CACHE"
VERSION = "0.88.0"
DEFAULT_CACHE = "/var/cache/miniclusters"
BUILT_STAMP = ".miniclusters-installed"  # written by `make flux-core` only after `make install` succeeded


class FluxCoreNotFound(MiniclustersError, LookupError):
    """No usable flux-core install; the message says where we looked and how to get one."""


@dataclass(frozen=True)
class FluxCore:
    """An installed flux-core: the prefix (what /mnt/flux/view is in a pod) and its Python bindings."""

    prefix: Path

    @property
    def flux(self) -> Path:
        return self.prefix / "bin" / "flux"

    @property
    def python_path(self) -> Path | None:
        """The directory holding the `flux` Python package (PREFIX/lib/python3.X/site-packages)."""
        found = sorted(self.prefix.glob("lib/python3*/site-packages/flux/__init__.py"))
        return found[-1].parent.parent if found else None


def default_prefix() -> Path:
    cache = os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    return Path(cache) / f"flux-core-{VERSION}"


def is_flux_core(prefix: Path) -> bool:
    """A flux-core install has its command directory and broker under libexec (our `flux` has neither)."""
    return (prefix / "bin" / "flux").is_file() and (prefix / "libexec" / "flux" / "cmd").is_dir()


def _on_path() -> Path | None:
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(entry or ".") / "flux"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            prefix = candidate.resolve().parent.parent
            if is_flux_core(prefix):
                return prefix
    return None


def find_flux_core() -> FluxCore:
    """The flux-core to run, or FluxCoreNotFound saying how to provide one."""
    explicit = os.environ.get(PREFIX_ENV)
    if explicit:
        if not is_flux_core(Path(explicit)):
            raise FluxCoreNotFound(
                f"${PREFIX_ENV}={explicit}: no flux-core install there (expected bin/flux and libexec/flux/cmd)"
            )
        return FluxCore(Path(explicit))
    found = _on_path()
    if found is not None:
        return FluxCore(found)
    built = default_prefix()
    if is_flux_core(built) and (built / BUILT_STAMP).exists():
        return FluxCore(built)
    raise FluxCoreNotFound(
        f"flavour 'flux' needs flux-core: none on PATH, ${PREFIX_ENV} is unset and {built} holds no finished "
        "build; run `make flux-core` (builds it there), or set FLUX_CORE_PREFIX to an installed flux-core"
    )
