#!/bin/sh
# Build (and optionally push) our images from the repository root, named as RenderOptions expects:
#   REGISTRY/miniclusters-broker:TAG, REGISTRY/openmpi-openfoam:TAG, REGISTRY/miniclusters-flux-view:TAG
# Usage: images/build.sh [REGISTRY] [TAG] [--push]
# Environment:
#   ENGINE          podman, buildah or docker (default: the first one installed, in that order)
#   MINICLUSTERS_BASE  the FROM of every image (default debian:12: pulled, else made by images/base.sh)
#   IMAGES          which to build (default: "broker openmpi-openfoam flux-view pause"; pause is the Kubernetes
#                   pod sandbox image `minicluster kube up` imports, always named registry.k8s.io/pause:3.10)
#   FORCE=1         rebuild even when an image of the same content exists
#   DRY_RUN=1       only say which images are up to date and which would be built
#   FLUX_CORE_TARBALL  flux-core's release tarball for flux-view (default ../shared/peers/flux-core-0.88.0.tar.gz)
#   MINICLUSTERS_BUILD_CA  a CA bundle the build's pip trusts (default /etc/ssl/certs/ca-certificates.crt)
#
# Each image is built once per content: its inputs (Dockerfile directory, the sources it copies, the base image's
# id) are hashed into the label miniclusters.content-hash, and an image already carrying that hash is kept
# (the hash is also written to MINICLUSTERS_IMAGES_CACHE/NAME.hash, next to the build's log). Inside a build
# the engine's layer cache keeps the slow steps (PyInstaller's analysis, flux-core's compile) while only our
# code changed. podman and buildah read our containers.conf (runtime runc, rlimits this machine allows).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' miniclusters/__init__.py)
registry="${1:-${MINICLUSTERS_REGISTRY:-ghcr.io/miniclusters}}"
tag="${2:-${MINICLUSTERS_TAG:-$version}}"  # RenderOptions' defaults: the images a rendered pod points at
push="${3:-}"
cache="${MINICLUSTERS_IMAGES_CACHE:-/var/cache/miniclusters/images}"
export MINICLUSTERS_IMAGES_CACHE="$cache"
mkdir -p "$cache"

engine="${ENGINE:-}"
if [ -z "$engine" ]; then
  for candidate in podman buildah docker; do
    if command -v "$candidate" >/dev/null; then engine=$candidate; break; fi
  done
fi
[ -n "$engine" ] || { echo "build.sh: no podman, buildah or docker found" >&2; exit 1; }
export ENGINE="$engine"
[ "$engine" = docker ] || export CONTAINERS_CONF="${CONTAINERS_CONF:-$root/images/containers.conf}"

base="${MINICLUSTERS_BASE:-}"
if [ -z "$base" ]; then
  base=debian:12
  [ -n "${DRY_RUN:-}" ] || BASE_IMAGE=docker.io/library/debian:12 sh images/base.sh
fi

inspect() {  # inspect IMAGE FIELD (id or label): print it, nothing when the image is missing
  case "$engine:$2" in
    buildah:id) format='{{.FromImageID}}' ;;
    buildah:label) format='{{ index .OCIv1.Config.Labels "miniclusters.content-hash" }}' ;;
    *:id) format='{{.Id}}' ;;
    *:label) format='{{ index .Config.Labels "miniclusters.content-hash" }}' ;;
  esac
  case "$engine" in
    docker) docker image inspect --format "$format" "$1" 2>/dev/null || true ;;
    *) "$engine" inspect --type image --format "$format" "$1" 2>/dev/null || true ;;
  esac
}
base_id=$(inspect "$base" id)
[ -n "$base_id" ] || { echo "build.sh: base image $base is not in $engine's store" >&2; exit 1; }

flux_tarball="${FLUX_CORE_TARBALL:-$root/../shared/peers/flux-core-0.88.0.tar.gz}"
ca="${MINICLUSTERS_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}"
package="pyproject.toml common miniclusters broker elasticity bursting .dockerignore"

content_hash() {  # content_hash PATH...: one hash of every file's path and bytes (no byte-code caches)
  find "$@" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}

for dir in ${IMAGES:-broker openmpi-openfoam flux-view pause}; do
  image=""
  case "$dir" in
    broker) name=miniclusters-broker; inputs="images/broker $package" ;;
    openmpi-openfoam)
      name=openmpi-openfoam
      inputs="images/openmpi-openfoam elasticity/workloads/proxy_solver.c elasticity/workloads/malleable_jacobi.c elasticity/pmpi/mc_pmpi.c elasticity/pmpi/mc_wait.h elasticity/pmpi/mc_wake.h" ;;
    flux-view)
      name=miniclusters-flux-view; inputs="images/flux-view $package"
      staged="images/flux-view/$(basename "$flux_tarball")"
      if [ -f "$flux_tarball" ]; then
        cmp -s "$flux_tarball" "$staged" || cp "$flux_tarball" "$staged"  # into the build context (git-ignored)
      elif [ ! -f "$staged" ]; then
        echo "build.sh: flux-core tarball not found: $flux_tarball (set FLUX_CORE_TARBALL)" >&2; exit 1
      fi ;;
    pause) name=pause; inputs="images/pause"; image=registry.k8s.io/pause:3.10 ;;
    *) echo "build.sh: unknown image $dir (broker, openmpi-openfoam, flux-view, pause)" >&2; exit 2 ;;
  esac
  [ -n "$image" ] || image="$registry/$name:$tag"
  hash=$( (echo "$base $base_id"; content_hash $inputs) | sha256sum | cut -c1-16)
  if [ -z "${FORCE:-}" ] && [ "$(inspect "$image" label)" = "$hash" ]; then
    echo "$image: up to date ($hash)"
    echo "$hash" >"$cache/$dir.hash"
  elif [ -n "${DRY_RUN:-}" ]; then
    echo "$image: would build ($hash)"
  else
    echo "$image: building ($engine; log: $cache/$dir.log)"
    start=$(date +%s)
    set -- -f "images/$dir/Dockerfile" --build-arg "BASE=$base" --label "miniclusters.content-hash=$hash" -t "$image"
    [ -s "$ca" ] && set -- "$@" --secret "id=ca-certificates,src=$ca"
    case "$engine" in
      podman) set -- podman build --layers "$@" . ;;
      buildah) set -- buildah bud --layers --isolation chroot "$@" . ;;
      docker) set -- env DOCKER_BUILDKIT=1 docker build "$@" . ;;
    esac
    if ! "$@" >"$cache/$dir.log" 2>&1; then
      tail -n 30 "$cache/$dir.log" >&2
      echo "build.sh: building $image failed: see $cache/$dir.log" >&2
      exit 1
    fi
    echo "$hash" >"$cache/$dir.hash"
    echo "$image: built in $(( $(date +%s) - start ))s"
  fi
  if [ "$push" = "--push" ]; then "$engine" push "$image"; fi
done
