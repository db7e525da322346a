#!/usr/bin/env bash
# Build the container image from the Dockerfile with podman, where no image registry is reachable:
# the Python base is made from Debian's own packages with mmdebstrap (python3 and its venv module,
# the Python the Dockerfile expects) and given to the build as PYTHON_IMAGE. pip inside the build
# reaches the registries the host's pip reaches: the host's pip configuration (its files and PIP_*
# variables, merged) and its CA bundle are mounted into the build's RUN steps, never copied into
# the image. The build runs on the host's network.
#
# Cached and bounded: the base is built once per recipe (its tag carries the recipe's hash), the
# build reuses its layers (the dependencies' layer is rebuilt only when pyproject.toml or the
# Dockerfile change), and the images of older recipes and dangling layers are removed after each
# build. Everything lives in its own podman storage under the cache directory.
#
#   scripts/build-image.sh [TAG]        TAG defaults to localhost/alertd:dev; prints the image's id
#
# Running it: podman with the same storage and deploy/podman/containers.conf, e.g.
#   CONTAINERS_CONF=deploy/podman/containers.conf podman --root "$ALERTD_CACHE/podman/storage" \
#     --runroot "$ALERTD_CACHE/podman/run" run ... localhost/alertd:dev
#
# Environment:
#   ALERTD_CACHE   cache dir (default: $HOME/.cache/alertd-test)
#   PYTHON         interpreter whose pip configuration is passed on (default: .venv's, else python3)
# Needs root, podman with runc, and mmdebstrap (scripts/install-test-deps.sh installs them).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ALERTD_CACHE:-$HOME/.cache/alertd-test}"
TAG="${1:-localhost/alertd:dev}"
PYTHON="${PYTHON:-$( [ -x "$REPO_ROOT/.venv/bin/python" ] && echo "$REPO_ROOT/.venv/bin/python" || echo python3)}"
SUITE=bookworm   # Debian 12: Python 3.11, as the Dockerfile's PYTHON_IMAGE
BASE_PACKAGES=python3,python3-venv,ca-certificates
# What a slim image leaves out: manuals, documentation (the copyright files stay) and translations;
# and the usrmerge package with the perl it needs (about 50 MB): the merged-usr hook sets up /usr.
BASE_DPKG_OPTS=(
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
)

log() { printf '[build-image] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

export CONTAINERS_CONF="$REPO_ROOT/deploy/podman/containers.conf"
PODMAN=(podman --root "$CACHE/podman/storage" --runroot "$CACHE/podman/run")

for tool in podman mmdebstrap runc; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/install-test-deps.sh installs it)"
done
mkdir -p "$CACHE/podman"
WORK="$(mktemp -d "$CACHE/podman/.build-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# One build at a time per cache (pytest workers, a developer's shell).
exec 9>"$CACHE/podman/.lock"
flock 9

# The host's Debian sources, so that mmdebstrap reaches the mirror apt reaches.
sources() {
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    echo /etc/apt/sources.list.d/debian.sources
  elif [ -s /etc/apt/sources.list ]; then
    echo /etc/apt/sources.list
  fi
}

base_image() {
  local src recipe key tag t0=$SECONDS
  src="$(sources)"
  recipe="$SUITE $BASE_PACKAGES ${BASE_DPKG_OPTS[*]} $( [ -n "$src" ] && cat "$src" )"
  key="$(printf '%s' "$recipe" | sha256sum | cut -c1-12)"
  tag="localhost/alertd-base:$SUITE-$key"
  if ! "${PODMAN[@]}" image exists "$tag"; then
    log "base $tag: mmdebstrap $SUITE with $BASE_PACKAGES"
    local proxy=()
    local APT_PROXY=""
    eval "$(apt-config shell APT_PROXY Acquire::http::Proxy)"
    [ -z "$APT_PROXY" ] || proxy=(--aptopt="Acquire::http::Proxy \"$APT_PROXY\"")
    mmdebstrap --quiet --mode=root --variant=minbase --include="$BASE_PACKAGES" "${BASE_DPKG_OPTS[@]}" \
      "${proxy[@]}" --aptopt='Acquire::Check-Valid-Until "false"' \
      "$SUITE" "$WORK/base.tar" ${src:+"$src"} >&2
    "${PODMAN[@]}" import --quiet --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
      "$WORK/base.tar" "$tag" >/dev/null
    rm -f "$WORK/base.tar"
    log "base $tag: built in $((SECONDS - t0)) s"
  fi
  # Bounded: the bases of other recipes go.
  "${PODMAN[@]}" images --format '{{.Repository}}:{{.Tag}}' --filter reference=localhost/alertd-base \
    | grep -vxF "$tag" | xargs -r "${PODMAN[@]}" rmi --force >/dev/null 2>&1 || true
  echo "$tag"
}

# The host's effective pip configuration as one file (files and PIP_* variables, the later winning,
# as pip reads them), with the CA bundle and any find-links directory mounted at the same paths.
pip_mounts() {
  "$PYTHON" - "$WORK/pip.conf" <<'PY'
import configparser, os, re, subprocess, sys

listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
conf = configparser.ConfigParser(interpolation=None)
mounts = []
entries = [m.groups() for line in listed.splitlines() if (m := re.fullmatch(r"(.+?)\.([\w-]+)='(.*)'", line))]
# PIP_* variables win over the files, whatever order pip lists them in.
for section, key, value in sorted(entries, key=lambda e: e[0] == ":env:"):
    section = "global" if section == ":env:" else section
    paths = value.split()
    if key in ("cert", "client-cert", "find-links") and all(p.startswith("/") for p in paths):
        present = [p for p in paths if os.path.exists(p)]
        mounts += present
        if not present:
            continue  # a path of the host's that does not exist means nothing inside either
        value = " ".join(present)
    conf.setdefault(section, {})[key] = value
bundle = "/etc/ssl/certs/ca-certificates.crt"
if not conf.has_option("global", "cert"):
    for candidate in (os.environ.get("SSL_CERT_FILE", ""), bundle):
        if candidate and os.path.isfile(candidate):
            conf.setdefault("global", {})["cert"] = candidate
            mounts.append(candidate)
            break
with open(sys.argv[1], "w") as f:
    conf.write(f)
for path in dict.fromkeys(mounts):
    print(f"{path}:{path}:ro")
print(f"{sys.argv[1]}:/etc/pip.conf:ro")
PY
}

main() {
  local t0=$SECONDS base volumes=() v
  base="$(base_image)"
  while IFS= read -r v; do volumes+=(-v "$v"); done < <(pip_mounts)
  log "building $TAG on $base"
  # The build stage is tagged too: its layers (the dependencies) are no ancestors of the image, and
  # the prune below would take them, cache and all.
  local stage
  for stage in "--target=build -t $TAG-build" "-t $TAG"; do
    # shellcheck disable=SC2086  # $stage: two options and their values, without spaces of their own
    "${PODMAN[@]}" build --quiet --layers --format docker --network host --pull-never \
      --build-arg PYTHON_IMAGE="$base" "${volumes[@]}" $stage -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT" >/dev/null
  done
  "${PODMAN[@]}" image prune --force >/dev/null
  log "$TAG built in $((SECONDS - t0)) s: $("${PODMAN[@]}" image inspect --format '{{.Size}}' "$TAG") bytes"
  "${PODMAN[@]}" image inspect --format '{{.Id}}' "$TAG"
}

main
