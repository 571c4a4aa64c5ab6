#!/usr/bin/env bash
# `make run`: the audit of a bundled sample store that has something to say — RocketMQ 5.5.1's store of a
# broker that crashed, with a body byte flipped in a record RocketMQ's recovery will read — printed for the
# terminal and written as one HTML file. Usage: scripts/run.sh [STORE [HTML]].
# The audit exits 3 when it finds problems or data at risk: on this sample that is the expected answer, so
# it counts as success here (said on stderr); 1 (internal failure) and 2 (usage error) fail the run.
set -uo pipefail
cd "$(dirname "$0")/.."
store=${1:-tests/golden/rocketmq-5.5.1/corrupt-body/store}
html=${2:-build/audit-report.html}
mkdir -p "$(dirname "$html")"
.venv/bin/rocketstore audit "$store" --html "$html"
status=$?
if [ "$status" -eq 3 ]; then
  echo "run: exit status 3 — the audit found problems, as expected on this damaged sample store (on your own" \
       "store, 3 means problems found or data at risk)" >&2
  exit 0
fi
exit "$status"
