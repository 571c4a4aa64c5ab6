"""The DAG of jobs/airflow under real Airflow (.venv-airflow, a subprocess): it imports with no error, and
``dag.test()`` runs it end to end on the sample stores: clean stores raise no alert, a damaged one raises
the alert, whose report names the findings. The stores are only read: their files are the same after."""
from __future__ import annotations

import json

import pytest

from tests.airflow.conftest import DAG_ID, DAGS, ROOT
from tests.golden.goldens import BY_ID

pytestmark = pytest.mark.long             # the Airflow virtualenv (first time), then Airflow's own start-up

DAGBAG = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
dag = bag.dags.get(sys.argv[2])
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": sorted(bag.dags),
                  "tasks": {t.task_id: type(t).__name__ for t in dag.tasks} if dag else {},
                  "params": sorted(dag.params) if dag else []}))
"""


def test_the_dags_folder_imports_with_no_errors(airflow):
    proc = airflow.run(["-c", DAGBAG, str(DAGS), DAG_ID])
    assert proc.returncode == 0, proc.stderr[-5000:]
    bag = json.loads(proc.stdout.strip().splitlines()[-1])
    assert bag["errors"] == {}
    assert bag["dags"] == [DAG_ID]            # the helpers beside it are no DAGs (.airflowignore)
    assert bag["params"] == ["ingest_table", "max_lag", "output_dir", "rocketstore_home", "rocketstore_venv",
                             "stores"]
    # the operators Airflow users know, over our CLI and our jobs
    assert {k: v for k, v in bag["tasks"].items() if k.startswith("store_checks.")} == {
        "store_checks.prepare": "_PythonDecoratedOperator", "store_checks.audit": "BashOperator",
        "store_checks.ingest": "SparkSubmitOperator", "store_checks.summary": "SparkSubmitOperator",
        "store_checks.evaluate": "_PythonDecoratedOperator"}
    assert bag["tasks"]["decide"] == "_BranchPythonDecoratedOperator"


def _tree(path):
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


def _run(airflow, tmp_path, stores, **conf):
    before = {s: _tree(s) for s in stores if s.exists()}
    # relative store paths are taken from rocketstore_home, as the README's examples
    result, proc = airflow.test_dag({"stores": [str(s.relative_to(ROOT)) if s.is_relative_to(ROOT) else str(s)
                                                for s in stores],
                                     "rocketstore_home": str(ROOT), "output_dir": str(tmp_path / "out"), **conf},
                                    tmp_path / "result.json")
    assert {s: _tree(s) for s in before} == before          # the audit and the jobs only read the stores
    runs = list((tmp_path / "out" / "runs").iterdir())
    assert len(runs) == 1
    return result, runs[0], proc


@pytest.mark.spark
def test_clean_stores_raise_no_alert(airflow, tmp_path):
    stores = [BY_ID["5.5.1/clean"].store, BY_ID["4.9.8/clean"].store]
    result, run, _ = _run(airflow, tmp_path, stores)
    tasks = result["tasks"]
    assert result["state"] == "success", tasks
    for i in range(len(stores)):
        for step in ("audit", "summary", "evaluate"):
            assert tasks[f"store_checks.{step}[{i}]"] == "success", tasks
    assert tasks["store_checks.ingest"] == "skipped"          # no ingest_table
    assert (tasks["decide"], tasks["all_clear"], tasks["alert"]) == ("success", "success", "skipped")
    assert tasks["checks_complete"] == "success"
    assert not (run / "alert.txt").exists()
    folders = sorted(p for p in run.iterdir() if p.is_dir())
    assert len(folders) == len(stores)
    for folder in folders:
        assert (folder / "summary.status").read_text() == "0\n"
        assert "health: healthy" in (folder / "summary.txt").read_text()
        assert json.loads((folder / "audit.json").read_text())["stores"][0]["at_risk"] is False


@pytest.mark.spark
def test_a_damaged_store_raises_the_alert_naming_its_findings(airflow, tmp_path):
    """A damaged store, and beside it a store path that vanished: the alert names the damage and the store
    that could not be checked; the run fails once the alert went out."""
    g = BY_ID["5.5.1/corrupt-body"]
    vanished = tmp_path / "vanished" / "store"
    result, run, proc = _run(airflow, tmp_path, [g.store, vanished])
    tasks = result["tasks"]
    # the audit's and the summary's exit 3 is the answer, not a failed task; a path that is no store is
    # the audit's exit 2, a failure
    assert (tasks["store_checks.audit[0]"], tasks["store_checks.summary[0]"]) == ("success", "success"), tasks
    assert tasks["store_checks.audit[1]"] == "failed"
    assert (tasks["decide"], tasks["alert"], tasks["all_clear"]) == ("success", "success", "skipped")
    assert (tasks["checks_complete"], result["state"]) == ("failed", "failed")
    store_folder = next(p for p in run.iterdir() if p.is_dir() and p.name.startswith("corrupt-body"))
    assert (store_folder / "summary.status").read_text() == "3\n"
    alert = (run / "alert.txt").read_text()
    assert alert.startswith("rocketstore: 2 of 2 RocketMQ store(s) need attention\n")
    assert f"Store {vanished}\n  - its checks did not finish" in alert
    assert f"Store {g.store}\n" in alert
    end = g.manifest["recovery"]["commitlog_max_offset"]
    lost = [m for m in g.messages if m["physical_offset"] > end and m["body_crc_ok"]]
    assert f"data at risk: a restart now would lose {len(lost)} message(s)" in alert
    # each flipped byte's record, named by file and position, in the alert's findings and in the summary's
    for s in g.manifest["surgery"]:
        record = next(m for m in g.messages
                      if m["physical_offset"] <= s["physical_offset"] < m["physical_offset"] + m["total_size"])
        assert f"[error] commitlog.body_crc: {s['file']} @ byte {record['file_position']:,} " \
               f"(physical offset {record['physical_offset']:,})" in alert
    assert "health: 2 error(s), 0 warning(s), 2 BODYCRC failure(s)" in alert
    # the default notifier: the report file, and the same text in the task log
    log = proc.stdout + proc.stderr
    assert "rocketstore: 2 of 2 RocketMQ store(s) need attention" in log
    assert f"(written to {run / 'alert.txt'})" in log
    assert f"{vanished}: no such file or directory" in log        # the audit's own word, in its task log
