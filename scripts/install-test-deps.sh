#!/usr/bin/env bash
# Install the real services that the integration and end-to-end tests run
# against: Prometheus, Alertmanager, PostgreSQL, etcd (Debian packages), the
# OpenSearch and Elasticsearch distributions (fetched from Maven Central with
# mvn, unpacked into a cache directory, run with the machine's JDK), and
# kube-apiserver, kubectl and helm (built from the Go module proxy by
# scripts/build-kube.sh, cached), and node-problem-detector (scripts/build-npd.sh,
# from its Go module, cached), and podman with mmdebstrap for the container image
# (scripts/build-image.sh, run by its test, builds and caches the image).
#
# Idempotent and fast on a warm machine: apt is skipped when every package is
# installed, a distribution is skipped when it is already unpacked and was
# seen to start. Does not install the Python project itself.
#
# Environment:
#   ALERTD_CACHE                  cache dir (default: $HOME/.cache/alertd-test)
#   ALERTD_OPENSEARCH_VERSION     default 2.19.6
#   ALERTD_ELASTICSEARCH_VERSION  default 8.19.21
#   ALERTD_SKIP_ELASTICSEARCH=1   do not fetch Elasticsearch
#   ALERTD_SKIP_KUBE=1            do not build kube-apiserver or node-problem-detector (their tests then skip, or fail under CI)
#   ALERTD_SKIP_START_CHECK=1     do not start a freshly unpacked distribution
#   PYTHON                        interpreter for the start check (default python3)
# --apt-only                      install the Debian packages and stop
set -euo pipefail

CACHE="${ALERTD_CACHE:-$HOME/.cache/alertd-test}"
OPENSEARCH_VERSION="${ALERTD_OPENSEARCH_VERSION:-2.19.6}"
ELASTICSEARCH_VERSION="${ALERTD_ELASTICSEARCH_VERSION:-8.19.21}"
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
SERVICE_USER="${ALERTD_TEST_USER:-alertd-test}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"

log() { printf '[install-test-deps] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); fi
fi

installed() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | grep -q '^ii'; }

apt_packages() {
  local missing=() p
  # chromium + chromium-driver: the browser tests of the web UI (tests/browser/, selenium).
  # openssl: the test certificates of the TLS listener; util-linux: mount (tmpfs for the disk-full tests).
  # etcd-server: the store of the kube-apiserver the Kubernetes tests run against.
  # podman, buildah, runc and mmdebstrap: the container image's test (scripts/build-image.sh builds
  # its Python base from Debian packages; rootful, on the host's network: no slirp4netns or fuse-overlayfs).
  for p in prometheus prometheus-alertmanager postgresql etcd-server maven curl unzip chromium chromium-driver openssl util-linux \
      podman buildah runc mmdebstrap; do
    installed "$p" || missing+=("$p")
  done
  if ! installed openjdk-17-jdk-headless && ! installed default-jdk-headless; then
    missing+=(default-jdk-headless)
  fi
  if [ "${#missing[@]}" -eq 0 ]; then
    log "apt: all packages present"
    return
  fi
  log "apt: installing ${missing[*]}"
  # Keep the package scripts from starting the system-wide PostgreSQL cluster
  # (the tests start their own); only when no policy is in place already.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${SUDO[@]}" chmod 755 /usr/sbin/policy-rc.d
    trap '"${SUDO[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  local fresh=0
  if find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | grep -q .; then
    fresh=1
  else
    "${SUDO[@]}" apt-get update -qq
  fi
  if ! apt_install "${missing[@]}"; then
    [ "$fresh" -eq 1 ] || die "apt-get install failed"
    log "apt: install failed with the cached package lists; updating and retrying"
    "${SUDO[@]}" apt-get update -qq
    apt_install "${missing[@]}" || die "apt-get install failed"
  fi
}

apt_install() {
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

service_user() {
  # OpenSearch, Elasticsearch and PostgreSQL refuse to run as root; the tests
  # run them as this unprivileged system user when they run as root.
  [ "$(id -u)" -eq 0 ] || return 0
  if ! id "$SERVICE_USER" >/dev/null 2>&1; then
    log "creating system user $SERVICE_USER"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$SERVICE_USER"
  fi
}

# fetch_dist NAME GROUP ARTIFACT VERSION
# Unpacks GROUP:ARTIFACT:VERSION:zip to $CACHE/ARTIFACT-VERSION, then starts it
# once through testkit/services.py and records that it started.
fetch_dist() {
  local name="$1" group="$2" artifact="$3" version="$4"
  local dest="$CACHE/$artifact-$version" marker
  marker="$dest/.alertd-start-ok"
  if [ -f "$marker" ]; then
    log "$name $version: ready in $dest"
    return
  fi
  if [ ! -x "$dest/bin/$artifact" ]; then
    local dl="$CACHE/downloads" tmp
    mkdir -p "$dl"
    log "$name $version: fetching $group:$artifact:$version:zip from Maven Central"
    if ! mvn -B --no-transfer-progress -Dstyle.color=never "$DEPENDENCY_PLUGIN:copy" \
        -Dartifact="$group:$artifact:$version:zip" -DoutputDirectory="$dl" \
        -Dmdep.overWriteReleases=true >"$dl/mvn.log" 2>&1; then
      tail -n 40 "$dl/mvn.log" >&2
      die "$name: mvn could not fetch $group:$artifact:$version:zip"
    fi
    tmp="$(mktemp -d "$CACHE/.unpack-XXXXXX")"
    unzip -q "$dl/$artifact-$version.zip" -d "$tmp"
    [ -x "$tmp/$artifact-$version/bin/$artifact" ] || die "$name: unexpected zip layout in $dl/$artifact-$version.zip"
    # The zips ship config files 0660: let an unprivileged service user read it all.
    chmod -R a+rX "$tmp/$artifact-$version"
    rm -rf "$dest"
    mv "$tmp/$artifact-$version" "$dest"
    rm -rf "$tmp" "$dl/$artifact-$version.zip"
  fi
  if [ "${ALERTD_SKIP_START_CHECK:-0}" = 1 ]; then
    log "$name $version: unpacked in $dest (start check skipped)"
    return
  fi
  log "$name $version: checking that it starts"
  local t0=$SECONDS
  (cd "$REPO_ROOT" && ALERTD_CACHE="$CACHE" "$PYTHON" -m testkit.services check "$name") \
    || die "$name $version did not start (see the log above)"
  touch "$marker"
  log "$name $version: started and stopped cleanly in $((SECONDS - t0)) s"
}

main() {
  local t0=$SECONDS
  apt_packages
  [ "${1:-}" != --apt-only ] || return 0
  service_user
  command -v java >/dev/null || die "java not found after the apt step"
  command -v mvn >/dev/null || die "mvn not found after the apt step"
  command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
  mkdir -p "$CACHE"
  # One install at a time per cache; leftovers of an interrupted unpack go.
  exec 9>"$CACHE/.lock"
  flock 9
  rm -rf "$CACHE"/.unpack-*
  export ALERTD_OPENSEARCH_VERSION="$OPENSEARCH_VERSION" ALERTD_ELASTICSEARCH_VERSION="$ELASTICSEARCH_VERSION"
  fetch_dist opensearch org.opensearch.distribution.integ-test-zip opensearch "$OPENSEARCH_VERSION"
  if [ "${ALERTD_SKIP_ELASTICSEARCH:-0}" != 1 ]; then
    fetch_dist elasticsearch org.elasticsearch.distribution.integ-test-zip elasticsearch "$ELASTICSEARCH_VERSION"
  fi
  if [ "${ALERTD_SKIP_KUBE:-0}" != 1 ]; then
    ALERTD_CACHE="$CACHE" bash "$REPO_ROOT/scripts/build-kube.sh"
    ALERTD_CACHE="$CACHE" bash "$REPO_ROOT/scripts/build-npd.sh"
    ALERTD_CACHE="$CACHE" bash "$REPO_ROOT/scripts/fetch-prometheus-operator-crds.sh"
  fi
  log "done in $((SECONDS - t0)) s (cache: $CACHE)"
}

main "$@"
