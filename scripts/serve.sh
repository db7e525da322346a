#!/usr/bin/env bash
# Install alertd into .venv and run `alertd serve` on the embedded defaults:
# SQLite under ./data, the shipped rules/, the console notifier.
# Extra arguments go to `alertd serve` (e.g. --config examples/alertd.yml).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
exec .venv/bin/alertd serve "$@"
