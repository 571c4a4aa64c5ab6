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
                             "scrub_state", "stores"]
    # the operators Airflow users know, over our CLI and our jobs
    assert {k: v for k, v in bag["tasks"].items() if k.startswith("store_checks.")} == {
        "store_checks.prepare": "_PythonDecoratedOperator", "store_checks.audit": "BashOperator",
        "store_checks.ingest": "SparkSubmitOperator", "store_checks.summary": "SparkSubmitOperator",
        "store_checks.evaluate": "_PythonDecoratedOperator"}
    assert bag["tasks"]["decide"] == "_BranchPythonDecoratedOperator"


def test_a_run_without_stores_fails_saying_so(airflow, tmp_path):
    result, proc = airflow.test_dag({"rocketstore_home": str(ROOT), "output_dir": str(tmp_path / "out")},
                                    tmp_path / "result.json")
    tasks = result["tasks"]
    assert (tasks["plan"], tasks["store_paths"], tasks["decide"], tasks["alert"]) == \
        ("success", "failed", "upstream_failed", "upstream_failed"), tasks
    assert (tasks["checks_complete"], result["state"]) == ("failed", "failed")
    log = proc.stdout + proc.stderr
    assert "no stores: give the stores param (a list of store paths) or set the Airflow Variable " \
           "rocketstore_stores to a JSON list" in log
    assert "no stores were checked: see the plan and store_paths task logs" in log


def _tree(path):
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


def _run(airflow, tmp_path, stores, home=ROOT, **conf):
    before = {s: _tree(s) for s in stores if s.exists()}
    # relative store paths are taken from rocketstore_home, as the README's examples
    result, proc = airflow.test_dag({"stores": [str(s.relative_to(home)) if s.is_relative_to(home) else str(s)
                                                for s in stores],
                                     "rocketstore_home": str(home), "output_dir": str(tmp_path / "out"), **conf},
                                    tmp_path / "result.json")
    assert {s: _tree(s) for s in before} == before          # the audit and the jobs only read the stores
    runs = list((tmp_path / "out" / "runs").iterdir())
    assert len(runs) == 1
    return result, runs[0], proc


@pytest.mark.spark
def test_clean_stores_raise_no_alert(airflow, tmp_path):
    """With scrub_state: the audit is the incremental scrub, a state file per store (its first run scans every
    segment)."""
    stores = [BY_ID["5.5.1/clean"].store, BY_ID["4.9.8/clean"].store]
    result, run, _ = _run(airflow, tmp_path, stores, scrub_state=str(tmp_path / "scrub"))
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
        entry = json.loads((folder / "audit.json").read_text())["stores"][0]
        assert entry["at_risk"] is False
        assert entry["scrub"]["run"] == 1 and len(entry["scrub"]["checked"]) == entry["scrub"]["segments"] > 0
        assert (tmp_path / "scrub" / f"{folder.name}.json").is_file()


# An ingest job that only says how it was run: the DAG's wiring of jobs/ingest.py (the job itself is tested
# with the job); exit 3 as the real one's when it met damage
INGEST_STUB = """
import json, os, sys
args = sys.argv[1:]
table = args[args.index("--table") + 1]
os.makedirs(table, exist_ok=True)
with open(os.path.join(table, "calls.jsonl"), "a") as f:
    f.write(json.dumps({"args": args, "python": sys.executable, "spark_submit": "PYSPARK_GATEWAY_SECRET" in os.environ,
                        "package_zip": [p for p in sys.path if p.endswith("rocketstore_spark.zip")]}) + "\\n")
print("ingest: met damage")
sys.exit(3)
"""


def _checkout_with_ingest(tmp_path):
    """The checkout as the DAG sees it, with an ingest job (linked, but for jobs/ingest.py)."""
    home = tmp_path / "checkout"
    (home / "jobs").mkdir(parents=True)
    for name in (".venv", "jars", "conf", "rocketstore_spark", "jobs/store_summary.py"):
        (home / name).symlink_to(ROOT / name)
    (home / "jobs" / "ingest.py").write_text(INGEST_STUB)
    return home


@pytest.mark.spark
def test_a_damaged_store_raises_the_alert_naming_its_findings(airflow, tmp_path):
    """A damaged store, and beside it a store path that vanished: the alert names the damage and the store
    that could not be checked; the run fails once the alert went out. With ingest_table, the ingest job runs
    first, through spark-submit as the summary, and its exit 3 is recorded."""
    g = BY_ID["5.5.1/corrupt-body"]
    vanished = tmp_path / "vanished" / "store"
    home, table = _checkout_with_ingest(tmp_path), tmp_path / "table"
    result, run, proc = _run(airflow, tmp_path, [g.store, vanished], home=home, ingest_table=str(table))
    tasks = result["tasks"]
    # the audit's, the ingest's and the summary's exit 3 is the answer, not a failed task; a path that is no
    # store is the audit's exit 2, a failure
    assert [tasks[f"store_checks.{t}[0]"] for t in ("audit", "ingest", "summary")] == ["success"] * 3, tasks
    assert tasks["store_checks.audit[1]"] == "failed"
    [call] = [json.loads(line) for line in (table / "calls.jsonl").read_text().splitlines()]
    assert call["args"] == ["--store", str(g.store), "--table", str(table)]
    assert call["spark_submit"] and call["python"] == str(home / ".venv" / "bin" / "python")
    assert call["package_zip"] == [str(tmp_path / "out" / "rocketstore_spark.zip")]
    assert (tasks["decide"], tasks["alert"], tasks["all_clear"]) == ("success", "success", "skipped")
    assert (tasks["checks_complete"], result["state"]) == ("failed", "failed")
    store_folder = next(p for p in run.iterdir() if p.is_dir() and p.name.startswith("corrupt-body"))
    assert (store_folder / "summary.status").read_text() == (store_folder / "ingest.status").read_text() == "3\n"
    assert (store_folder / "ingest.txt").read_text() == "ingest: met damage\n"
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
