#!/bin/sh
# Build (and optionally push) our images from the repository root, named as RenderOptions expects:
#   REGISTRY/miniclusters-broker:TAG, REGISTRY/openmpi-openfoam:TAG, REGISTRY/miniclusters-flux-view:TAG
# Usage: images/build.sh [REGISTRY] [TAG] [--push]
set -eu
registry="${1:-${MINICLUSTERS_REGISTRY:-ghcr.io/miniclusters}}"
tag="${2:-${MINICLUSTERS_TAG:-0.1.0}}"
cd "$(dirname "$0")/.."
for pair in broker:miniclusters-broker openmpi-openfoam:openmpi-openfoam flux-view:miniclusters-flux-view; do
  dir="${pair%%:*}"; name="${pair#*:}"
  docker build -f "images/$dir/Dockerfile" -t "$registry/$name:$tag" .
  [ "${3:-}" = "--push" ] && docker push "$registry/$name:$tag"
done
