#!/usr/bin/env bash
# The Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule) for the test API server, so the Helm
# chart's monitoring objects are checked by the real schema, not a hand-written one. They come from the
# operator's Go module (example/prometheus-operator-crd/) through the Go module proxy; cached.
# Environment:
#   ALERTD_CACHE                     cache dir (default: $HOME/.cache/alertd-test)
#   ALERTD_PROM_OPERATOR_VERSION     default v0.85.0
set -euo pipefail

CACHE="${ALERTD_CACHE:-$HOME/.cache/alertd-test}"
VERSION="${ALERTD_PROM_OPERATOR_VERSION:-v0.85.0}"
DEST="$CACHE/prometheus-operator-$VERSION/crds"
CRDS=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)

log() { printf '[prometheus-operator-crds] %s\n' "$*" >&2; }

if [ -f "$DEST/${CRDS[-1]}" ]; then
  log "$VERSION: ready in $DEST"
  exit 0
fi
command -v go >/dev/null || { log "ERROR: go not found (it downloads the operator's module)"; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
dir="$(cd "$work" && go mod download -json "github.com/prometheus-operator/prometheus-operator@$VERSION" \
  | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
[ -d "$dir/example/prometheus-operator-crd" ] || { log "ERROR: no CRDs in the module at $VERSION"; exit 1; }
mkdir -p "$DEST.tmp"
for crd in "${CRDS[@]}"; do
  cp "$dir/example/prometheus-operator-crd/$crd" "$DEST.tmp/"
done
cp "$dir/LICENSE" "$DEST.tmp/LICENSE"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
log "$VERSION: CRDs in $DEST"
