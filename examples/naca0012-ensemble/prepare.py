"""Prepare the OpenFOAM NACA0012 case for an N-rank run and write the solver's argv.

    python examples/naca0012-ensemble/prepare.py DEST [--np 16] [--method concentric]
        [--weights 1,1,1,1,1,1,1,1,5,5,5,5,15,15,15,15] [--iterations 20]

DEST gets the case (mesh built, bounded to --iterations, decomposed) and DEST/command.txt with the
mpirun argv, one argument per line, for `minicluster profile -- ...` or any other launcher.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from elasticity.workloads.foam import FoamError
from elasticity.workloads.openfoam import METHODS, decompose, prepare_naca0012, set_end_time, solver_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dest", type=Path, help="new directory for the case")
    parser.add_argument("--np", type=int, default=16, dest="np_", help="MPI ranks (default 16)")
    parser.add_argument("--method", choices=METHODS, default="concentric")
    parser.add_argument("--weights", help="comma-separated ring weights (concentric only)")
    parser.add_argument("--iterations", type=int, default=20, help="SIMPLE iterations (default 20)")
    args = parser.parse_args(argv)
    weights = [float(w) for w in args.weights.split(",")] if args.weights else None
    try:
        case = prepare_naca0012(args.dest)
        set_end_time(case, args.iterations)
        split = decompose(case, args.np_, args.method, weights=weights)
    except (FoamError, ValueError, FileExistsError) as exc:
        print(f"prepare.py: {exc}", file=sys.stderr)
        return 1
    command = solver_command(case, args.np_)
    (case.path / "command.txt").write_text("\n".join(command) + "\n")
    print(f"case {case.path}: {case.n_cells} cells, {args.method} on {args.np_} ranks", file=sys.stderr)
    print(f"cells per rank: {' '.join(map(str, split.cells_per_processor))}", file=sys.stderr)
    print(shlex.join(command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
