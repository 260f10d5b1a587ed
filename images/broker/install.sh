#!/bin/sh
# Copy the self-contained broker environment into DEST (the pod's shared volume, /mnt/miniclusters).
# Afterwards DEST/bin/flux is our built-in broker's CLI, DEST/bin/minicluster our command and DEST/bin/python3
# the bundle's interpreter for its own modules: one PyInstaller bundle (see Dockerfile), so the application
# image needs neither Python nor Flux, only glibc. Symlinks inside it are relative: cp -a keeps them working.
set -eu
dest="${1:?usage: install.sh DEST (e.g. /mnt/miniclusters)}"
source_dir="${MINICLUSTERS_ENV:-/opt/miniclusters/env}"
[ -x "$source_dir/bin/flux" ] || { echo "install.sh: $source_dir/bin/flux is missing" >&2; exit 1; }
mkdir -p "$dest"
# Each entry, not "$source_dir/.": copying "." would also set DEST's own times and owner, which a non-root user
# may not do on a volume it does not own (a Kubernetes emptyDir is root's, mode 0777: EPERM, and the pod's init
# container failed; podman's volumes happened to be ours).
find "$source_dir" -mindepth 1 -maxdepth 1 -exec cp -a {} "$dest/" \;
# Prove the copy works from its new place before the broker container starts.
"$dest/bin/flux" --help >/dev/null
echo "install.sh: broker environment installed in $dest (flux: $dest/bin/flux)"
