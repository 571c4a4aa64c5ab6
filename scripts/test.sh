#!/usr/bin/env bash
# Runs the whole test suite. pytest exits 5 when it collects nothing: that is a failure here, never a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
