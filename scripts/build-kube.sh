#!/usr/bin/env bash
# Build the real Kubernetes control plane the tests run against: kube-apiserver,
# kube-controller-manager (for PodDisruptionBudget status and the default
# ServiceAccount) and kubectl from k8s.io/kubernetes, and helm, all from the Go
# module proxy; etcd comes from Debian (etcd-server). Nothing here needs a kubelet:
# nodes and pods are plain API objects.
#
# `go install k8s.io/kubernetes/cmd/...@vX` refuses the module (its go.mod
# replaces every k8s.io/* staging module with a local path), so a scratch module
# requires k8s.io/kubernetes and replaces each staging module with its published
# version instead. The version is stamped into the binaries (component-base
# version), or /version would say v0.0.0.
#
# Cached: a warm run does nothing (binaries and a marker under the cache).
# Environment:
#   ALERTD_CACHE           cache dir (default: $HOME/.cache/alertd-test)
#   ALERTD_KUBE_VERSION    default v1.34.4
#   ALERTD_HELM_VERSION    default v3.19.5
set -euo pipefail

CACHE="${ALERTD_CACHE:-$HOME/.cache/alertd-test}"
KUBE_VERSION="${ALERTD_KUBE_VERSION:-v1.34.4}"
HELM_VERSION="${ALERTD_HELM_VERSION:-v3.19.5}"
DEST="$CACHE/kube-$KUBE_VERSION"
MARKER="$DEST/.alertd-build-ok"

log() { printf '[build-kube] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [ -f "$MARKER" ]; then
  log "kube-apiserver $KUBE_VERSION: ready in $DEST/bin"
  exit 0
fi
command -v go >/dev/null || die "go not found (the Go toolchain, 1.24 or later, builds kube-apiserver, kubectl and helm)"
gov="$(go env GOVERSION)"; gov="${gov#go}"
[ "$(printf '%s\n1.24\n' "${gov%.*}" | sort -V | head -n1)" = "1.24" ] || die "go $gov is too old: k8s.io/kubernetes $KUBE_VERSION needs 1.24 or later"
t0=$SECONDS
mkdir -p "$DEST/bin"
work="$(mktemp -d "$CACHE/.kube-build-XXXXXX")"
trap 'rm -rf "$work"' EXIT

minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
staging="v0.${KUBE_VERSION#v1.}"  # k8s.io/api etc. are published as v0.<minor>.<patch>

log "resolving k8s.io/kubernetes@$KUBE_VERSION"
modfile="$(cd "$work" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
[ -f "$modfile" ] || die "could not download k8s.io/kubernetes@$KUBE_VERSION"

{
  echo "module alertd.test/kube"
  grep -E '^(go|godebug) ' "$modfile"
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  grep -E '=> \./staging/src/' "$modfile" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
} > "$work/go.mod"
cat > "$work/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF

ldflags="-s -w"
for v in gitVersion=$KUBE_VERSION gitMajor=1 gitMinor=$minor gitTreeState=clean; do
  ldflags="$ldflags -X k8s.io/component-base/version.$v -X k8s.io/client-go/pkg/version.$v"
done
(cd "$work" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true)
for cmd in kube-apiserver kube-controller-manager kubectl; do
  log "building $cmd $KUBE_VERSION"
  (cd "$work" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$DEST/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd") \
    || die "building $cmd failed"
done

log "building helm $HELM_VERSION"
helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
helm_ldflags="$helm_ldflags -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
helm_ldflags="$helm_ldflags -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
GOBIN="$DEST/bin" GOFLAGS= go install -trimpath -ldflags "$helm_ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
  || die "building helm failed"

"$DEST/bin/kube-apiserver" --version >&2
"$DEST/bin/kubectl" version --client >&2 || true
"$DEST/bin/helm" version >&2 || true
touch "$MARKER"
log "built in $((SECONDS - t0)) s into $DEST/bin"
