#!/usr/bin/env bash
# Install everything the tests need (Debian packages, OpenSearch/Elasticsearch from
# Maven Central, Python packages into .venv), then run the whole suite. The test
# session starts each real service (Prometheus, Alertmanager, PostgreSQL,
# OpenSearch, Elasticsearch, kube-apiserver) itself, on free loopback ports, once per
# pytest-xdist worker that needs it.
# Extra arguments go to pytest (e.g. -k correlation, -x).
#
# `scripts/test.sh --unit [pytest args]` is the fast loop: no installs, no services,
# ruff + mypy + tests/unit with the Python of .venv (or $PYTHON, or python3), in
# under a minute. mypy runs beside pytest's two workers.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--unit" ]; then
  shift
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=${PYTHON:-python3}; fi
  "$PY" -m ruff check alertd tests bench testkit
  mypy_out=$(mktemp); trap 'rm -f "$mypy_out"' EXIT
  "$PY" -m mypy > "$mypy_out" 2>&1 & mypy_pid=$!
  # Two pytest workers (pytest-xdist, in the test extra) when the .venv has it: unit tests share nothing.
  workers=(); if "$PY" -c 'import xdist' 2>/dev/null; then workers=(-n 2); fi
  status=0
  "$PY" -m pytest -p no:cacheprovider -q "${workers[@]}" tests/unit "$@" || status=$?
  mypy_status=0
  wait "$mypy_pid" || mypy_status=$?
  cat "$mypy_out"
  [ "$status" -ne 0 ] && exit "$status"
  exit "$mypy_status"
fi
bash scripts/install-test-deps.sh
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# pip runs again only when pyproject.toml changed since the last install into this .venv.
stamp=.venv/.alertd-test-deps
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test]'
  echo "$want" > "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
# Lint and types first (configured in pyproject.toml): they fail in seconds, the suite takes minutes.
.venv/bin/ruff check alertd tests bench testkit
.venv/bin/mypy
# pytest-xdist workers (ALERTD_TEST_WORKERS, default 4; `scripts/test.sh -n 0` runs serially). Most of the
# suite's time is tests waiting on real clocks and real services, not CPU, so 4 workers beat 2 even on 2
# cores. loadgroup keeps the tests of one xdist_group (tests/conftest.py: the search servers, the
# kube-apiserver, a module-scoped fixture) on one worker, which starts that service once.
# pytest exits 5 when it collected no tests: with `set -e` that fails the run too.
exec .venv/bin/python -m pytest -p no:cacheprovider -ra --durations=15 \
  -n "${ALERTD_TEST_WORKERS:-4}" --dist loadgroup "$@"
