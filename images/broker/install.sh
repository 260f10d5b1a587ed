#!/bin/sh
# Copy the self-contained broker environment into DEST (the pod's shared volume, /mnt/miniclusters).
# Afterwards DEST/bin/flux is our built-in broker's CLI, DEST/bin/minicluster our command and DEST/bin/python3
# the bundle's interpreter for its own modules: one PyInstaller bundle (see Dockerfile), so the application
# image needs neither Python nor Flux, only glibc. Symlinks inside it are relative: cp -a keeps them working.
# The environment's extras (numpy, matplotlib, the Kubernetes client: images/broker/bundle_parts.py), which the
# broker, `flux`, the REST server and the burst service never import, are copied only with --with-extras (the
# renderer asks for them where a pod needs them: campaigns, bursting); without them the copy is about a third.
# --with-extras-on-lead copies them only in the lead's pod (JOB_COMPLETION_INDEX 0, which the Indexed Job sets in
# init containers too): its REST server draws the /cluster page's figures with matplotlib.
set -eu
usage="usage: install.sh DEST [--with-extras | --with-extras-on-lead] (e.g. /mnt/miniclusters)"
dest="${1:?$usage}"
extras="${2:-}"
case "$extras" in
  ""|--with-extras) ;;
  --with-extras-on-lead) [ "${JOB_COMPLETION_INDEX:-0}" = 0 ] && extras=--with-extras || extras="" ;;
  *) echo "install.sh: unknown option $extras; $usage" >&2; exit 2 ;;
esac
source_dir="${MINICLUSTERS_ENV:-/opt/miniclusters/env}"
[ -x "$source_dir/bin/flux" ] || { echo "install.sh: $source_dir/bin/flux is missing" >&2; exit 1; }
mkdir -p "$dest"
# Each entry, not "$source_dir/.": copying "." would also set DEST's own times and owner, which a non-root user
# may not do on a volume it does not own (a Kubernetes emptyDir is root's, mode 0777: EPERM, and the pod's init
# container failed; podman's volumes happened to be ours).
if [ -n "$extras" ]; then
  find "$source_dir" -mindepth 1 -maxdepth 1 -exec cp -a {} "$dest/" \;
else
  find "$source_dir" -mindepth 1 -maxdepth 1 ! -name extras -exec cp -a {} "$dest/" \;
fi
# Prove the copy works from its new place before the broker container starts.
"$dest/bin/flux" --help >/dev/null
echo "install.sh: broker environment installed in $dest (flux: $dest/bin/flux)${extras:+ with its extras}"
