#!/usr/bin/env bash
# Build node-problem-detector from its Go module (k8s.io/node-problem-detector),
# the producer whose node conditions and Events the kube-health source reads.
#
# Its Makefile builds with CGO_ENABLED=0 and without the `journald` tag unless
# ENABLE_JOURNALD=1; we do the same: the kernel monitor's `filelog` and `kmsg`
# plugins need no cgo, and the tests feed it a log file. The module's go.mod has
# no local replaces, so `go install module/cmd@version` works as-is.
#
# Cached: a warm run does nothing (binary and a marker under the cache).
# Environment:
#   ALERTD_CACHE         cache dir (default: $HOME/.cache/alertd-test)
#   ALERTD_NPD_VERSION   default v0.8.20
set -euo pipefail

CACHE="${ALERTD_CACHE:-$HOME/.cache/alertd-test}"
NPD_VERSION="${ALERTD_NPD_VERSION:-v0.8.20}"
DEST="$CACHE/npd-$NPD_VERSION"
MARKER="$DEST/.alertd-build-ok"

log() { printf '[build-npd] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [ -f "$MARKER" ]; then
  log "node-problem-detector $NPD_VERSION: ready in $DEST/bin"
  exit 0
fi
command -v go >/dev/null || die "go not found (the Go toolchain, 1.23 or later, builds node-problem-detector)"
t0=$SECONDS
mkdir -p "$DEST/bin"
ldflags="-s -w -X k8s.io/node-problem-detector/pkg/version.version=$NPD_VERSION"
# `go install module/cmd@version` asks the proxy for the module's version list
# (to check deprecation), which the proxy may refuse; so fetch the pinned module,
# copy it to a writable scratch dir (go.sum may gain lines) and build it there.
log "resolving k8s.io/node-problem-detector@$NPD_VERSION"
work="$(mktemp -d "$CACHE/.npd-build-XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/node-problem-detector@$NPD_VERSION" \
  | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
[ -d "$src" ] || die "could not download k8s.io/node-problem-detector@$NPD_VERSION"
cp -r "$src" "$work/src" && chmod -R u+w "$work/src"
log "building node-problem-detector $NPD_VERSION"
(cd "$work/src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" \
  -o "$DEST/bin/nodeproblemdetector" ./cmd/nodeproblemdetector) \
  || die "building node-problem-detector failed"
"$DEST/bin/nodeproblemdetector" --version >&2 || die "the built node-problem-detector does not run"
touch "$MARKER"
log "built in $((SECONDS - t0)) s into $DEST/bin"
