# Sourced by scripts/setup.sh and scripts/airflow_env.sh: sets PYTHON to a Python 3.11 ($PYTHON if given,
# else python3.11, else python3), or stops with a message naming the script ($1).
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null \
  || { echo "$1: Python 3.11 is required (found $("$PYTHON" --version 2>&1))" >&2; exit 1; }
