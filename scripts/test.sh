#!/usr/bin/env bash
# Runs the whole test suite. pytest exits 5 when it collects nothing: that is a failure here, never a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
# the HTML report's browser test needs Debian's chromium (installed here when absent)
bash scripts/chromium.sh || { echo "test: chromium could not be installed (scripts/chromium.sh)" >&2; exit 1; }
# the slowest tests are listed at the end: what each part of the suite costs, in every CI log
.venv/bin/python -m pytest --durations=30 "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
