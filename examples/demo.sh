#!/usr/bin/env bash
# `make demo`: examples/hello.yaml as 4 pods on this machine (local backend), an Open MPI program across all of
# them printing each rank's pod hostname, `flux resource list`, then everything torn down. Under a minute.
# FLAVOUR=flux (`make demo FLAVOUR=flux`) runs real flux-core brokers in the pods instead of the built-in ones.
#
# As root every pod gets its own network namespace, hostname and CPU cgroup; otherwise the pods are plain
# processes on loopback addresses (the notice says what is not isolated).
set -euo pipefail
cd "$(dirname "$0")/.."
MINICLUSTER=${MINICLUSTER:-.venv/bin/minicluster}
NAME=hello
FLAVOUR=${FLAVOUR:-builtin}
work=$(mktemp -d "${TMPDIR:-/tmp}/mc-demo.XXXXXX")
cleanup() {
    "$MINICLUSTER" down "$NAME" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# The application image's program (images/openmpi-openfoam), built for this machine and put on the pods' PATH.
command -v mpicc >/dev/null || { echo "demo: mpicc not found (apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 1; }
mpicc -O2 -o "$work/mpi-hello" images/openmpi-openfoam/mpi-hello.c
export PATH="$work:$PATH"
# REFERENCE.md section 5: TCP between pods (no shared memory across them); mpirun as root needs the opt-in.
export OMPI_MCA_btl=tcp,self OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Clusters of this demo live in their own state directory unless the caller chose one.
export MINICLUSTERS_STATE_DIR=${MINICLUSTERS_STATE_DIR:-$work/state}

start=$(date +%s)
step "minicluster up examples/hello.yaml --flavour $FLAVOUR --interactive --detach   (4 pods; brokers join over CURVE)"
"$MINICLUSTER" up examples/hello.yaml --flavour "$FLAVOUR" --interactive --detach --timeout 60

step "minicluster exec $NAME -- flux version   (which broker runs in the pods)"
"$MINICLUSTER" exec "$NAME" -- flux version | head -2

step "minicluster exec $NAME -- flux resource list"
"$MINICLUSTER" exec "$NAME" -- flux resource list

step "minicluster exec $NAME -- flux submit -N 4 -n 4 --watch mpi-hello   (the spec's command, as the lead runs it)"
"$MINICLUSTER" exec "$NAME" -- flux submit -N 4 -n 4 --watch mpi-hello

step "minicluster status $NAME"
"$MINICLUSTER" status "$NAME"

step "minicluster down $NAME"
"$MINICLUSTER" down "$NAME"
echo "demo finished in $(( $(date +%s) - start ))s"
