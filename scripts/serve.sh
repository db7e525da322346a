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
# pip and the build backend talk at length (an editable install prints a warning block on every
# run): their output goes to a log, shown only when the install fails.
log=.venv/install.log
echo "serve.sh: installing alertd into .venv (log: $log)"
if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e .; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "serve.sh: installing alertd failed; the pip output is above and in $log" >&2
  exit 1
fi
exec .venv/bin/alertd serve "$@"
