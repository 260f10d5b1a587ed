#!/bin/sh
# Make sure the base image our Dockerfiles build FROM (debian:12, passed as --build-arg BASE) is in the local
# image store of ENGINE (podman, buildah or docker): present already, else pulled, else made from Debian packages:
#   debootstrap --variant=minbase bookworm  ->  a root filesystem tarball  ->  `ENGINE import` as debian:12
# The machines we build on reach Debian's archive and PyPI but no image registry, and the pull fails at once there.
# The tarball is cached (per recipe version, below) under MINICLUSTERS_IMAGES_CACHE, so a store that was emptied
# is refilled in seconds. The made image is a plain Debian 12 like the registry's (no Python), labelled as made here.
# Usage: images/base.sh   (as root when it must debootstrap; env: ENGINE, BASE_IMAGE, DEBIAN_MIRROR)
set -eu
engine="${ENGINE:-podman}"
image="${BASE_IMAGE:-docker.io/library/debian:12}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${MINICLUSTERS_IMAGES_CACHE:-/var/cache/miniclusters/images}"

exists() {
  case "$engine" in
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
    *) "$engine" inspect --type image "$1" >/dev/null 2>&1 ;;
  esac
}

if exists "$image"; then
  echo "base image $image: present"
  exit 0
fi
if "$engine" pull "$image" >/dev/null 2>&1; then
  echo "base image $image: pulled"
  exit 0
fi
echo "base image $image: no registry answered; making it from Debian packages (debootstrap)"
command -v debootstrap >/dev/null || { echo "base.sh: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "base.sh: debootstrap needs root" >&2; exit 1; }
mkdir -p "$cache"
recipe=r1  # bump when what goes into the root filesystem below changes: the cached tarball is then remade
tarball="$cache/debian-12-minbase-$recipe.tar"
if [ ! -s "$tarball" ]; then
  start=$(date +%s)
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root" "$tarball.part"' EXIT
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { echo "base.sh: debootstrap failed: see $cache/debootstrap.log" >&2; exit 1; }
  # The registry image's apt sources (with updates and security), and its small-image habits: no package
  # caches or lists left behind.
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
  : >"$root/etc/hostname"
  tar --numeric-owner -C "$root" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
  rm -rf "$root"
  trap - EXIT
  echo "base image: debootstrap took $(( $(date +%s) - start ))s ($tarball)"
fi
description="Debian 12 minbase, made by miniclusters images/base.sh from Debian packages"
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ "$engine" = buildah ]; then
  container=$(buildah from scratch)
  buildah add "$container" "$tarball" / >/dev/null
  buildah config --env "PATH=$path" --cmd bash --label "org.opencontainers.image.description=$description" "$container"
  buildah commit --rm "$container" "$image" >/dev/null
else
  quiet=""; [ "$engine" = podman ] && quiet=--quiet
  "$engine" import $quiet --change "ENV PATH=$path" --change 'CMD ["bash"]' \
    --change "LABEL org.opencontainers.image.description=\"$description\"" "$tarball" "$image" >/dev/null
fi
echo "base image $image: imported from $tarball"
