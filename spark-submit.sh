#!/usr/bin/env bash
# Runs a rocketstore-spark job with the project's Spark (from .venv), settings (conf/) and JARs (jars/).
#   ./spark-submit.sh jobs/store_summary.py --store tests/golden/rocketmq-5.5.1/clean/store
# SPARK_MASTER overrides the master (default local[*]); extra spark-submit options go in SPARK_SUBMIT_OPTS_EXTRA.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ -x "$here/.venv/bin/python" ] || { echo "spark-submit.sh: run 'make setup' first" >&2; exit 1; }
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
  echo "usage: ./spark-submit.sh JOB.py [job arguments]   e.g. ./spark-submit.sh jobs/store_summary.py --store PATH" >&2
  [ $# -ge 1 ] && echo "spark-submit.sh: no such job file: $1" >&2
  exit 2
fi
job="$1"; shift
jars=$(ls "$here"/jars/*.jar 2>/dev/null | paste -sd, -)
[ -n "$jars" ] || { echo "spark-submit.sh: no JARs in $here/jars: run 'make setup'" >&2; exit 1; }
# the package travels to executors as a zip (the workers' Python must have the pinned dependencies)
mkdir -p "$here/build"
(cd "$here" && rm -f build/rocketstore_spark.zip && "$here/.venv/bin/python" -m zipfile -c build/rocketstore_spark.zip rocketstore_spark >/dev/null)
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$here/.venv/bin/python}"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$here/.venv/bin/python}"
exec "$here/.venv/bin/spark-submit" \
  --master "${SPARK_MASTER:-local[*]}" \
  --properties-file "$here/conf/spark-defaults.conf" \
  --driver-java-options "-Dlog4j.configurationFile=file:$here/conf/log4j2.properties" \
  --jars "$jars" \
  --py-files "$here/build/rocketstore_spark.zip" \
  ${SPARK_SUBMIT_OPTS_EXTRA:-} \
  "$job" "$@"
