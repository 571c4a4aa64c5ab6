#!/usr/bin/env bash
# Runs the whole test suite. pytest exits 5 when it collects nothing: that is a failure here, never a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
# the HTML report's browser test needs Debian's chromium (installed here when absent)
bash scripts/chromium.sh || { echo "test: chromium could not be installed (scripts/chromium.sh)" >&2; exit 1; }
.venv/bin/python -m pytest "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
