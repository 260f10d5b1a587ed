#!/usr/bin/env bash
# Prepare the NACA0012 case, split it into concentric rings and profile one run with the PMPI
# profiler: per-rank duty cycles, proposed per-pod CPU requests and a figure (profile.png).
#
#   examples/naca0012-ensemble/profile.sh [DEST] [NP] [ITERATIONS] [WEIGHTS]
#   examples/naca0012-ensemble/profile.sh /tmp/naca 4 10 1,1,5,15      # ~15 s on 2 cores
#   examples/naca0012-ensemble/profile.sh /tmp/naca16 16 10             # default 16-rank weights
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dest="${1:-$(mktemp -d)/naca0012}"
np="${2:-4}"
iterations="${3:-10}"
weights="${4:-}"
if [ -z "$weights" ] && [ "$np" = 4 ]; then weights=1,1,5,15; fi

python="${PYTHON:-$repo/.venv/bin/python}"
minicluster="${MINICLUSTER:-$repo/.venv/bin/minicluster}"
[ -x "$python" ] || python=python3
[ -x "$minicluster" ] || minicluster=minicluster

# Open MPI on a shared, oversubscribed machine (REFERENCE.md section 5): loopback only, as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include="${OMPI_MCA_btl_tcp_if_include:-lo}"
export OMPI_MCA_oob_tcp_if_include="${OMPI_MCA_oob_tcp_if_include:-lo}"

"$python" "$here/prepare.py" "$dest" --np "$np" --method concentric --iterations "$iterations" \
    ${weights:+--weights "$weights"} >/dev/null
mapfile -t command < "$dest/command.txt"

# rhoSimpleFoam (v1912) never calls MPI_Barrier: every MPI_Allreduce ends a profiling window.
cd "$dest"
# The solver's own output goes to profile.txt too; show only the report.
COLUMNS="${COLUMNS:-120}" "$minicluster" profile --boundary MPI_Allreduce --plot "$dest/profile.png" \
    -- "${command[@]}" > "$dest/profile.txt"
sed -n '/Duty cycle per rank/,$p' "$dest/profile.txt"
echo "case $dest; solver output and report: $dest/profile.txt; figure: $dest/profile.png" >&2
