"""Random Jacobi job mixes as in the Charm++ elastic-scheduling paper: a 64-slot cluster, jobs of four
problem sizes with [min, max] replicas 2-8, 4-16, 8-32, 16-64, priorities 1-5, one job every ``gap`` seconds.

Stated model (the paper measured real runs; these are our parameters): every problem size runs
``RUNTIME_AT_MIN`` seconds on its minimum replicas and scales by Amdahl's law with serial fraction
``SERIAL_FRACTION``; the requested time is the run time (perfect estimates). A seed picks each job's problem
size and priority uniformly.
"""

from __future__ import annotations

import numpy as np

from elasticity.model.speedup import Amdahl, JobSize
from elasticity.sim.workload import SimJob, Workload

SLOTS = 64
PROBLEM_SIZES = ((2, 8), (4, 16), (8, 32), (16, 64))
PRIORITIES = (1, 5)
RUNTIME_AT_MIN = 1200.0
SERIAL_FRACTION = 0.01


def jacobi_mix(jobs: int, gap: float, seed: int, slots: int = SLOTS) -> Workload:
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    if gap < 0:
        raise ValueError(f"--gap must be >= 0 seconds, got {gap}")
    if slots < max(high for _, high in PROBLEM_SIZES):
        raise ValueError(f"--nodes must be at least {PROBLEM_SIZES[-1][1]} for the Jacobi mixes, got {slots}")
    rng = np.random.default_rng(seed)
    classes = rng.integers(0, len(PROBLEM_SIZES), size=jobs)
    priorities = rng.integers(PRIORITIES[0], PRIORITIES[1] + 1, size=jobs)
    model = Amdahl(SERIAL_FRACTION)
    mix = []
    for index in range(jobs):
        low, high = PROBLEM_SIZES[int(classes[index])]
        # The "preferred" size is the minimum: that is the size the run time above is stated for.
        runtime = RUNTIME_AT_MIN
        size = JobSize(low, low, high)
        mix.append(SimJob(index + 1, index * gap, runtime, runtime, size, int(priorities[index]), model))
    note = (
        f"Jacobi mix (seed {seed}): {jobs} jobs every {gap:g} s on {slots} slots; [min,max] replicas "
        f"{', '.join(f'{a}-{b}' for a, b in PROBLEM_SIZES)}; priorities {PRIORITIES[0]}-{PRIORITIES[1]}; "
        f"{RUNTIME_AT_MIN:g} s at min replicas, Amdahl serial fraction {SERIAL_FRACTION}"
    )
    return Workload(f"jacobi-{jobs}x{gap:g}s", slots, tuple(mix), (note,))
