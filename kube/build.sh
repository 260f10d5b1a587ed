#!/bin/sh
# Build Kubernetes, CoreDNS and crictl from their Go modules into KUBE_CACHE/KUBE_VERSION/bin (called by
# `make kube` under flock; the Makefile writes the stamp only after this succeeds). Nothing is fetched but Go
# modules from the module proxy; GOMODCACHE and GOCACHE live in KUBE_CACHE so a second checkout builds nothing.
#   KUBE_VERSION=v1.37.2 KUBE_CACHE=/var/cache/miniclusters/kube sh kube/build.sh
set -eu
cd "$(dirname "$0")"
here=$(pwd)
: "${KUBE_VERSION:?set KUBE_VERSION}" "${KUBE_CACHE:?set KUBE_CACHE}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
CRICTL_VERSION="${CRICTL_VERSION:-v1.37.0}"
export GOMODCACHE="$KUBE_CACHE/gomod" GOCACHE="$KUBE_CACHE/gocache" GOFLAGS=-mod=mod GOTOOLCHAIN=local
export CGO_ENABLED=0  # static binaries, as Kubernetes releases them (the kubelet needs no cgo here)
out="$KUBE_CACHE/$KUBE_VERSION"
src="$out/src"
mkdir -p "$out/bin" "$src"

step() { echo "kube: $*"; }

# 1. our go.mod: k8s.io/kubernetes at the pinned release, each staging module replaced by its v0.x release,
#    the list read from that release's own go.mod (kube/gomod.py).
step "go.mod for k8s.io/kubernetes $KUBE_VERSION"
kube_mod=$(cd "$src" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -f "$kube_mod" ] || { echo "kube/build.sh: could not fetch k8s.io/kubernetes@$KUBE_VERSION's go.mod" >&2; exit 1; }
python3 "$here/gomod.py" "$KUBE_VERSION" "$kube_mod" >"$src/go.mod.new"
mv "$src/go.mod.new" "$src/go.mod"

minor=$(echo "$KUBE_VERSION" | sed -n 's/^v1\.\([0-9]*\)\..*/\1/p')
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

# 2. the control plane, the node and the client (one `go build`: shared packages compile once).
step "building kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl (cold: about 20 minutes on 2 cores)"
start=$(date +%s)
(cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$out/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
  k8s.io/kubernetes/cmd/kubectl)
step "Kubernetes built in $(( $(date +%s) - start ))s"

# 3. cluster DNS and the CRI client `down` uses to tear pods down through containerd (CNI included).
#    Neither module replaces anything, so `go install module@version` builds exactly that release.
start=$(date +%s)
GOBIN="$out/bin" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
GOBIN="$out/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
step "CoreDNS $COREDNS_VERSION and crictl $CRICTL_VERSION built in $(( $(date +%s) - start ))s"
"$out/bin/kubelet" --version
