#!/usr/bin/env bash
# Debian's chromium for the HTML report's browser test (tests/report/test_html.py), installed with apt-get
# when absent; never a browser downloaded from elsewhere. Idempotent; nothing on stdout. Called by
# scripts/test.sh, and by the test itself when it runs alone.
set -euo pipefail
for browser in chromium chromium-browser; do
  command -v "$browser" >/dev/null 2>&1 && exit 0
done
command -v apt-get >/dev/null 2>&1 \
  || { echo "chromium: not installed and no apt-get here: install Chromium for the HTML report test" >&2; exit 1; }
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo -n"
echo "setup: installing Debian's chromium with apt-get (the HTML report test opens the report in it)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq </dev/null >&2
$sudo apt-get install -y -qq chromium </dev/null >&2
