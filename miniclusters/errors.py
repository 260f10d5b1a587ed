"""The root of the product's errors, so a caller can catch whatever miniclusters raises on purpose in one place.

The kinds: SpecError (api/errors.py: a spec wrong as given, a ValueError), BackendError and its tree
(backends/base.py: what a backend could not do; also the decision layer's ActuatorError, so controllers catch
it through their ports), TenantError, LockBusy, ApiError (the Kubernetes API said no), and the local backend's
LatencyError, ProgramBuildError, NetworkError, CgroupError and FluxCoreNotFound. Each keeps its builtin base
(ValueError, RuntimeError, LookupError) so existing handlers still catch it.
"""

from __future__ import annotations


class MiniclustersError(Exception):
    """The root of every error the miniclusters package raises on purpose."""
