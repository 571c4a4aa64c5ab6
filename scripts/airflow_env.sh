#!/usr/bin/env bash
# One-time (idempotent) setup of .venv-airflow: the Airflow the DAG in jobs/airflow/ is tested with
# (jobs/airflow/requirements.txt, pinned), in a virtualenv of its own so that Airflow's pins never touch
# .venv's. Called by the Airflow tests' session fixture (tests/airflow/conftest.py); the DAG itself runs
# our CLI and jobs from .venv, never from here.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/python311.sh airflow_env

stamp_input=$(sha256sum jobs/airflow/requirements.txt | cut -c1-16)
if [ -f .venv-airflow/.stamp ] && [ "$(cat .venv-airflow/.stamp)" = "$stamp_input" ] \
    && [ -x .venv-airflow/bin/airflow ]; then
  exit 0
fi

echo "airflow_env: creating .venv-airflow from jobs/airflow/requirements.txt" >&2
# made anew: a venv left by other pins would keep packages the lock no longer names
rm -rf .venv-airflow
"$PYTHON" -m venv .venv-airflow
.venv-airflow/bin/python -m pip install -q --upgrade pip
.venv-airflow/bin/python -m pip install -q -r jobs/airflow/requirements.txt
echo "$stamp_input" > .venv-airflow/.stamp
