"""Concentric ("ring") decomposition of a mesh: pure numpy, no OpenFOAM.

Cells are sorted by their distance to a centre (the aerofoil's chord mid-point) and cut into
contiguous rings, one per processor, each holding a share of the cells proportional to the
processor's weight. Mapping (documented choice): the heaviest processors take the innermost
rings. Near the wall the mesh is finest, so the heavy ranks are the "dense" near-wall ranks with
many cells and much work per iteration; the light ranks hold thin far-field rings with few cells
and spend most of each iteration waiting in MPI ("sparse" ranks). Ties in weight keep processor
order, so with the default weights (1 x8, 5 x4, 15 x4) processor 12 touches the aerofoil and
processor 7 holds the outermost ring.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The issue's 16-rank weight vector: 8 sparse far-field, 4 medium and 4 dense near-wall ranks.
DEFAULT_WEIGHTS: tuple[float, ...] = (1, 1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 15, 15, 15, 15)


def _check_weights(weights: Sequence[float] | np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"weights must be a non-empty 1-D sequence, got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"weights must be finite and positive, got {w.tolist()}")
    return w


def proportional_counts(n_cells: int, weights: Sequence[float] | np.ndarray) -> np.ndarray:
    """Cells per processor, proportional to `weights`, summing exactly to n_cells.

    Largest-remainder rounding (each count within one cell of n w_i / sum w), then every
    processor is given at least one cell: OpenFOAM cannot run a processor with an empty mesh.
    """
    w = _check_weights(weights)
    if n_cells < w.size:
        raise ValueError(f"cannot give {w.size} processors at least one cell each from {n_cells} cells")
    quota = n_cells * w / w.sum()
    counts = np.floor(quota).astype(np.int64)
    short = n_cells - int(counts.sum())
    # Largest remainders first; ties go to the lower processor index (stable sort).
    order = np.argsort(-(quota - counts), kind="stable")
    counts[order[:short]] += 1
    # Lift empty processors to one cell, taking the cell from the currently largest count.
    for i in np.flatnonzero(counts == 0):
        counts[int(np.argmax(counts))] -= 1
        counts[i] = 1
    lifted: np.ndarray = counts
    return lifted


def ring_order(weights: Sequence[float] | np.ndarray) -> np.ndarray:
    """Processor indices from the innermost ring outwards: heaviest first, ties in index order."""
    w = _check_weights(weights)
    return np.argsort(-w, kind="stable")


def concentric_assignment(distances: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray) -> np.ndarray:
    """Processor of every cell: rings by distance, heaviest processors innermost.

    distances[c] is cell c's distance to the centre; the result has the same length, dtype int64,
    and processor i receives proportional_counts(len(distances), weights)[i] cells. Equal distances
    keep cell order, so the result is deterministic.
    """
    d = np.asarray(distances, dtype=float)
    if d.ndim != 1:
        raise ValueError(f"distances must be 1-D, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError("distances must be finite")
    counts = proportional_counts(d.size, weights)
    order = ring_order(weights)
    by_distance = np.argsort(d, kind="stable")
    procs = np.repeat(order, counts[order])
    out = np.empty(d.size, dtype=np.int64)
    out[by_distance] = procs
    return out


def planar_distances(centres: np.ndarray, centre: Sequence[float], axes: tuple[int, int] = (0, 2)) -> np.ndarray:
    """Distance of each point (rows of `centres`) to `centre` in the plane of two axes.

    A 2-D case extruded by one cell (NACA0012: the x-z plane, extruded along y) has rings in that
    plane; the extrusion coordinate must not count.
    """
    c = np.asarray(centres, dtype=float)
    if c.ndim != 2 or c.shape[1] <= max(axes):
        raise ValueError(f"centres must be an (n, >{max(axes)}) array, got shape {c.shape}")
    p = np.asarray(centre, dtype=float)
    a, b = axes
    distances: np.ndarray = np.hypot(c[:, a] - p[a], c[:, b] - p[b])
    return distances


def grid_split(n: int) -> tuple[int, int, int]:
    """(nx, 1, nz) with nx * nz = n, as square as possible, nx >= nz: a 2-D x-z case has one cell in y."""
    if n < 1:
        raise ValueError(f"number of processors must be at least 1, got {n}")
    nz = max(d for d in range(1, int(n**0.5) + 1) if n % d == 0)
    return n // nz, 1, nz
