"""The MPI proxy solver (proxy_solver.c): a stencil with an imbalanced band decomposition, for fast tests.

Dense ranks (large weights) compute more rows per iteration; sparse ranks wait for them in MPI, so their duty
cycles differ the way a concentric split of a CFD mesh makes them differ, in seconds instead of minutes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from elasticity.pmpi.build import compile_with_mpicc

SOURCE = Path(__file__).with_name("proxy_solver.c")
PROGRAM = "proxy_solver"
CFLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")


def build_proxy_solver(output_dir: Path | str | None = None, mpicc: str = "mpicc", force: bool = False) -> Path:
    """Compile the proxy with the installed MPI wrapper (cached like the profiler library)."""
    return compile_with_mpicc(SOURCE, PROGRAM, CFLAGS, ("-lm",), output_dir, mpicc, force)


def proxy_arguments(iterations: int, weights: Sequence[int], nx: int = 256, rows_per_weight: int = 8) -> list[str]:
    """argv after the program: rank r gets rows_per_weight * weights[r] rows of nx cells."""
    if iterations < 1 or nx < 3 or rows_per_weight < 1 or not weights or min(weights) < 1:
        raise ValueError("need iterations >= 1, nx >= 3, rows_per_weight >= 1 and positive weights")
    return [str(iterations), str(nx), str(rows_per_weight), ",".join(str(int(w)) for w in weights)]
