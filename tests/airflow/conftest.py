"""The Airflow tests' setup (pytest process): .venv-airflow made by scripts/airflow_env.sh (Airflow's pins, never
.venv's), and a fresh AIRFLOW_HOME whose metadata database is an embedded SQLite file, migrated once a
session. Airflow itself only ever runs in subprocesses of .venv-airflow's Python."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "jobs" / "airflow"
DAG_ID = "rocketstore_store_audit"

# the helpers of the DAG that are plain Python are tested here, in .venv, as Airflow's dags folder has them
sys.path.insert(0, str(DAGS))


@dataclass(frozen=True)
class Airflow:
    python: Path
    env: dict

    def run(self, args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), *args], cwd=ROOT, env=self.env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)

    def test_dag(self, conf: dict, result: Path) -> tuple[dict, subprocess.CompletedProcess]:
        """One ``dag.test()`` run of the DAG with ``conf`` (tests/airflow/run_dag.py): its states, its output."""
        proc = self.run([str(ROOT / "tests" / "airflow" / "run_dag.py"), str(DAGS), DAG_ID, json.dumps(conf),
                         str(result)])
        assert proc.returncode == 0 and result.exists(), proc.stdout[-5000:] + proc.stderr[-5000:]
        return json.loads(result.read_text()), proc


@pytest.fixture(scope="session")
def airflow(tmp_path_factory) -> Airflow:
    setup = subprocess.run(["bash", "scripts/airflow_env.sh"], cwd=ROOT, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
    assert setup.returncode == 0, setup.stderr
    home = tmp_path_factory.mktemp("airflow-home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           # the Spark connection SparkSubmitOperator uses: a local master, as ./spark-submit.sh's default
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"})}
    af = Airflow(ROOT / ".venv-airflow" / "bin" / "python", env)
    migrate = af.run(["-m", "airflow", "db", "migrate"])
    assert migrate.returncode == 0, migrate.stderr[-5000:]
    return af
