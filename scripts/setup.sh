#!/usr/bin/env bash
# One-time (idempotent) setup: .venv with the package and its test dependencies, and the JARs Spark needs
# (Delta Lake) fetched by Maven into jars/. Called by `make setup`, hence by `make test` and `make run`.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/python311.sh setup
command -v java >/dev/null || { echo "setup: java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "setup: mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }

stamp_input=$(cat setup.cfg pyproject.toml jars/pom.xml | sha256sum | cut -c1-16)
if [ -f .setup-stamp ] && [ "$(cat .setup-stamp)" = "$stamp_input" ] && [ -x .venv/bin/python ]; then
  exit 0
fi

echo "setup: creating .venv and installing rocketstore-spark[test]" >&2
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'

echo "setup: fetching Delta Lake JARs with Maven into jars/" >&2
# the same command a pip-installed package offers (rocketstore_spark/spark/jars.py): jars/pom.xml's dependencies,
# less the JARs Spark already ships
.venv/bin/python -m rocketstore_spark.spark.jars fetch jars
echo "$stamp_input" > .setup-stamp
