"""Resource requests on plain numbers: Kubernetes CPU quantities as millicores, and a job's resource request.

Everything above the API boundary (policies, admission, the simulator, the local cgroups) works in integer
millicores; quantity strings ("500m", "2") exist only where a user or the API server reads or writes them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # decimal and importlib.util only where a quantity is parsed: an idle broker parses none
    from decimal import Decimal

BUNDLED_QUANTITY = Path(__file__).resolve().parents[2] / "kubernetes_quantity.py"
"""The client's quantity.py (standard library only), copied beside our packages in the broker bundle's core
(images/broker/Dockerfile), whose pods may be given the Kubernetes client itself only as an extra."""


@cache
def _kubernetes_parse_quantity() -> Callable[[object], Decimal]:
    """The official client's parser, loaded from its own file: importing `kubernetes.utils` runs the package's
    `__init__`, which imports the whole API client (about 0.8 s of CPU on every CLI call that reads a request)."""
    import importlib.util

    loaded = sys.modules.get("kubernetes.utils.quantity")
    if loaded is not None:
        parse: Callable[[object], Decimal] = loaded.parse_quantity
        return parse
    package = importlib.util.find_spec("kubernetes")
    if package is not None and package.submodule_search_locations:
        path = Path(next(iter(package.submodule_search_locations))) / "utils" / "quantity.py"
    elif BUNDLED_QUANTITY.is_file():  # a pod's broker bundle without its extras: the client's file alone
        path = BUNDLED_QUANTITY
    else:
        raise ImportError("the kubernetes client is not installed (pip install kubernetes)")
    if not path.is_file():  # frozen (the broker bundle keeps the client's modules in its archive): import it
        frozen: Callable[[object], Decimal] = importlib.import_module("kubernetes.utils.quantity").parse_quantity
        return frozen
    spec = importlib.util.spec_from_file_location("miniclusters_kubernetes_quantity", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parser: Callable[[object], Decimal] = module.parse_quantity
    return parser


def parse_quantity(value: str | int | float) -> Decimal:
    """A quantity as a Decimal (cores for cpu, bytes for memory); ValueError when it does not parse."""
    k8s_parse = _kubernetes_parse_quantity()
    if isinstance(value, bool):
        raise ValueError("a quantity must be a number or a string like '500m' or '2Gi'")
    try:
        parsed = k8s_parse(value)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')") from exc
    if parsed < 0:
        raise ValueError(f"{value!r} is negative")
    from decimal import Decimal

    return Decimal(parsed)


def cpu_millicores(value: str | int | float) -> int:
    """CPU quantity in millicores, rounded up the way the API server rounds sub-milli values."""
    cores = parse_quantity(value)
    milli = cores * 1000
    return int(milli.to_integral_value(rounding="ROUND_CEILING"))


def format_millicores(millicores: int) -> str:
    """Millicores in the form kubectl shows: `2` for whole cores, `500m` otherwise."""
    if millicores < 0:
        raise ValueError(f"negative CPU request {millicores}m")
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


@dataclass(frozen=True)
class ResourceRequest:
    """What one job asks of the scheduler (a Flux jobspec's resources, RFC 25, reduced to numbers)."""

    ntasks: int
    cores_per_task: int = 1
    nnodes: int | None = None
    exclusive: bool = False
    gpus_per_task: int = 0

    @property
    def total_cores(self) -> int:
        return self.ntasks * self.cores_per_task

    def tasks_per_node(self) -> list[int]:
        """How many tasks each allocated node gets when the node count is fixed (first nodes get the extra)."""
        if self.nnodes is None:
            raise ValueError("no node count")
        base, extra = divmod(self.ntasks, self.nnodes)
        return [base + (1 if i < extra else 0) for i in range(self.nnodes)]
