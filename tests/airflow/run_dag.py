"""Runs the DAG of jobs/airflow once with ``dag.test()``, in .venv-airflow (a subprocess of the tests, whose
own Python has no Airflow), and writes the run's state and each task instance's state as JSON.

    .venv-airflow/bin/python tests/airflow/run_dag.py DAG_FOLDER DAG_ID RUN_CONF_JSON RESULT_FILE

AIRFLOW_HOME (its metadata database migrated) and the connections come from the environment.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(dag_folder: str, dag_id: str, conf: str, result: str) -> int:
    # the dags folder as Airflow's DAG processor and task runner load it: on sys.path, as a bundle
    from airflow.dag_processing.dagbag import BundleDagBag
    bag = BundleDagBag(dag_folder, bundle_path=Path(dag_folder), bundle_name="dags-folder")
    if bag.import_errors:
        print(bag.import_errors, file=sys.stderr)
        return 1
    run = bag.dags[dag_id].test(run_conf=json.loads(conf))
    tasks = {f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id: str(ti.state)
             for ti in run.get_task_instances()}
    Path(result).write_text(json.dumps({"run_id": run.run_id, "state": str(run.state), "tasks": tasks}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
