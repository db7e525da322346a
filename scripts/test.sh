#!/usr/bin/env bash
# Install everything the tests need (Debian packages, OpenSearch/Elasticsearch from
# Maven Central, Python packages into .venv), then run the whole suite. The test
# session starts each real service (Prometheus, Alertmanager, PostgreSQL,
# OpenSearch, Elasticsearch) itself, on loopback ports, once.
# Extra arguments go to pytest (e.g. -k correlation, -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
export PATH="$PWD/.venv/bin:$PATH"
# Lint and types first (configured in pyproject.toml): they fail in seconds, the suite takes minutes.
.venv/bin/ruff check alertd tests bench
.venv/bin/mypy
# pytest exits 5 when it collected no tests: with `set -e` that fails the run too.
exec .venv/bin/python -m pytest -p no:cacheprovider -ra --durations=15 "$@"
