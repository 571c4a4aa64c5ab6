"""rocketstore_store_audit: the nightly check of RocketMQ broker stores, an Airflow 3 DAG.

Per store (one mapped task group per entry of the ``stores`` param):

1. ``prepare``: the store's output folder and commands (a Python task).
2. ``audit``: ``rocketstore audit`` and ``rocketstore offsets`` (read-only, no Spark) write their JSON
   documents; the audit's report goes to the task log. With the ``scrub_state`` param (a directory), the
   audit is the incremental scrub (``rocketstore audit --scrub``: only new and changed CommitLog segments and
   a rotating 1/28 of the rest are scanned, the cross-checks carried over when no file of the store
   changed, else resumed on what was written since), each store's state in ``scrub_state/<store>.json``; the same document, so the same verdict.
   A **BashOperator**, because our CLI is the contract:
   it runs in rocketstore-spark's own virtualenv (whose pins are not Airflow's), and its exit statuses mean
   0 clean, 3 problems found, 2 a usage error, 1 an internal error. BashOperator fails on any non-zero
   exit, so the script records 0 and 3 as the answer (its last line, the task's XCom) and exits 0; 1 and 2
   still fail the task.
3. ``ingest_wanted`` → ``ingest``: ``jobs/ingest.py`` appends the store's new messages to the Delta table
   of the ``ingest_table`` param; skipped when that is empty.
4. ``summary``: ``jobs/store_summary.py`` (per topic and segment, with every finding). ``ingest`` and
   ``summary`` are **SparkSubmitOperator**s (apache-airflow-providers-apache-spark): our jobs are
   spark-submit applications, and the provider's operator is how Airflow users run those, with the Spark
   connection they already have (``spark_default``: the master). They get what ./spark-submit.sh gives a
   job (properties file, JARs, the package as --py-files, the virtualenv's Python, log4j settings), and
   submit ``rocketstore_airflow/spark_answer.py``, which runs the job in the same driver and records its
   exit 3 (damage met) as an answer rather than a failed task. Not a BashOperator over ./spark-submit.sh:
   the provider's operator takes the master from the connection and stops the Spark application when the
   task is stopped. Not ``@task.pyspark``: that runs a function in Airflow's own Python, which would then
   need PySpark and our package with their pins, and not our jobs as they are.
5. ``evaluate``: the store's verdict from the documents (rocketstore_airflow/outcome.py): data at risk,
   new error findings since the store's last run, consumer lag over ``max_lag``.

Then, over all stores: ``decide`` branches to ``alert`` if any store has a reason, or its checks did not
finish, else to ``all_clear``. ``alert`` composes one alert (why, per store, and each store's summary) and
hands it to the notifiers of ``ALERT_NOTIFIERS`` as its ``on_success_callback``: by default a report file
(``alert.txt`` in the run's folder) and the task log; add Slack or e-mail notifiers with your own
connections (rocketstore_airflow/notifiers.py). Last, ``checks_complete`` fails the run if any store's
checks failed (after the alert about the others went out).

Settings (params of a manual run, else Airflow Variables, else defaults): rocketstore_airflow/config.py.
Every output goes under the output folder; the stores are only read.
"""
from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import Param, TriggerRule, Variable, dag, get_current_context, task, task_group
from airflow.sdk.exceptions import AirflowFailException

# The helpers sit beside this file. Airflow puts the dags folder on sys.path, which is this file's folder only
# when it was copied to the dags folder's top: installed as a subfolder (dags/rocketstore -> jobs/airflow),
# they are found through this.
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))

from rocketstore_airflow import config, outcome, report, seen
from rocketstore_airflow.notifiers import ReportFileNotifier

SPARK_ANSWER = str(HERE / "rocketstore_airflow" / "spark_answer.py")
SPARK_CONN_ID = "spark_default"       # the master (local[*], spark://…, yarn, k8s://…) and deploy mode: client

# Where alerts go (rocketstore_airflow/notifiers.py): add your own, e.g. SmtpNotifier or SlackNotifier
ALERT_NOTIFIERS = [ReportFileNotifier()]

# The audit task's script: its settings arrive as environment variables (never pasted into the command, so a
# store path with spaces or quotes is just a path). Exit 3 of our CLI is an answer: recorded, then exit 0.
AUDIT_SCRIPT = """
set -u
mkdir -p "$RS_OUT"
audit=0
if [ -n "${RS_SCRUB:-}" ]; then
  mkdir -p "$(dirname "$RS_SCRUB")"
  "$RS_ROCKETSTORE" audit "$RS_STORE" --output "$RS_OUT/audit.json" --scrub "$RS_SCRUB" || audit=$?
else
  "$RS_ROCKETSTORE" audit "$RS_STORE" --output "$RS_OUT/audit.json" || audit=$?
fi
offsets=0
"$RS_ROCKETSTORE" offsets "$RS_STORE" --json > "$RS_OUT/offsets.json" || offsets=$?
echo "$offsets" > "$RS_OUT/offsets.status"
for status in "$audit" "$offsets"; do
  case "$status" in 0|3) ;; *) echo "rocketstore exited $status (2: usage, 1: internal error)" >&2; exit "$status";; esac
done
echo "$audit"
"""


def _variable(name: str):
    return Variable.get(name, default=None)


def _status(path: Path) -> int | None:
    return int(path.read_text()) if path.exists() else None


@task(multiple_outputs=True)
def plan() -> dict:
    """The run's settings, checked before any store is touched, and the package zipped for the executors."""
    ctx = get_current_context()
    params = ctx["params"]
    home, venv = config.home_and_venv(params, _variable)
    table = params.get("ingest_table") or ""
    if table and not (home / "jobs" / "ingest.py").exists():
        raise config.SettingError(f"ingest_table is set but {home}/jobs/ingest.py does not exist: this "
                                  "rocketstore-spark has no ingest job yet; leave ingest_table empty")
    output = config.output_dir(params, _variable)
    run = config.run_dir(output, ctx["run_id"])
    scrub = params.get("scrub_state") or ""
    return {"home": str(home), "run_dir": str(run), "output_dir": str(output),
            "scrub_state": str((home / scrub).resolve()) if scrub else "",
            "rocketstore": str(venv / "bin" / "rocketstore"),
            "ingest_table": str((home / table).resolve()) if table else "",
            **config.spark_submit(home, venv, config.package_zip(home, output / "rocketstore_spark.zip"))}


@task
def store_paths(home: str) -> list[str]:
    """The stores to check, absolute: one mapped ``store_checks`` group each."""
    return config.stores(get_current_context()["params"], _variable, Path(home))


@task(multiple_outputs=True)
def prepare(store: str, settings: dict) -> dict:
    """One store's folder under the run's, its audit task's environment and its jobs' arguments."""
    slug = config.store_slug(store)
    out = Path(settings["run_dir"]) / slug
    out.mkdir(parents=True, exist_ok=True)
    jobs = Path(settings["home"]) / "jobs"

    def answer(name: str, job_args: list[str]) -> list[str]:
        return ["--status", str(out / f"{name}.status"), "--stdout", str(out / f"{name}.txt"), "--", *job_args]

    ingest = answer("ingest", [str(jobs / "ingest.py"), "--store", store, "--table", settings["ingest_table"]]) \
        if settings["ingest_table"] else []
    return {"out": str(out), "seen": str(Path(settings["output_dir"]) / "seen" / f"{slug}.json"),
            "ingest_args": ingest,
            "summary_args": answer("summary", [str(jobs / "store_summary.py"), "--store", store]),
            "audit_env": {"RS_STORE": store, "RS_OUT": str(out), "RS_ROCKETSTORE": settings["rocketstore"],
                          # one state file a store: the mapped audits run at once
                          "RS_SCRUB": str(Path(settings["scrub_state"]) / f"{slug}.json")
                          if settings["scrub_state"] else ""}}


# Outside the mapped group: a short-circuit inside one does not skip its own map index's downstream task in
# Airflow 3.3 (apache/airflow#67265); an unmapped one skips every index of a mapped task.
@task.short_circuit(ignore_downstream_trigger_rules=False)
def ingest_wanted(table: str) -> bool:
    """Whether the ingest job runs (the ingest_table param); when not, only ``ingest`` is skipped."""
    return bool(table)


@task
def evaluate(store: str, audit_status: str, out: str, seen_file: str) -> dict:
    """The store's verdict (rocketstore_airflow/outcome.py); remembers its error findings for the next run."""
    ctx = get_current_context()
    folder, state = Path(out), Path(seen_file)
    before = seen.seen_before(state, ctx["run_id"])
    statuses = {"audit": int(audit_status), "offsets": _status(folder / "offsets.status"),
                "ingest": _status(folder / "ingest.status"), "summary": _status(folder / "summary.status")}
    verdict = outcome.store_outcome(store, json.loads((folder / "audit.json").read_text()),
                                    json.loads((folder / "offsets.json").read_text()), before,
                                    int(ctx["params"]["max_lag"]), statuses)
    seen.remember(state, ctx["run_id"], verdict["error_keys"], before)
    return {**verdict, "audit_json": str(folder / "audit.json"), "summary_txt": str(folder / "summary.txt")}


@task_group
def store_checks(store: str, settings: dict, wanted):
    """audit → (ingest) → summary → evaluate, for one store."""
    prep = prepare(store, settings)
    audit = BashOperator(task_id="audit", bash_command=AUDIT_SCRIPT, env=prep["audit_env"], append_env=True)
    spark = {"conn_id": SPARK_CONN_ID, "application": SPARK_ANSWER, "properties_file": settings["properties_file"],
             "jars": settings["jars"], "py_files": settings["py_files"], "conf": settings["conf"],
             "env_vars": settings["env_vars"]}
    ingest = SparkSubmitOperator(task_id="ingest", name="rocketstore-ingest", application_args=prep["ingest_args"],
                                 **spark)
    # runs when ingest was skipped (no table) as when it succeeded, never when it failed
    summary = SparkSubmitOperator(task_id="summary", name="rocketstore-store-summary",
                                  application_args=prep["summary_args"], trigger_rule=TriggerRule.NONE_FAILED,
                                  **spark)
    verdict = evaluate(store, audit.output, prep["out"], prep["seen"])
    audit >> ingest >> summary >> verdict
    audit >> summary            # as well: a skipped ingest must not let the summary start before the audit
    wanted >> ingest
    return verdict


def _each(outcomes) -> list[dict]:
    # the mapped group's results: a lazy sequence over the stores whose checks finished, the one result itself
    # when one did (an XCom pull of one task that finds one value returns it bare), None when none did
    if outcomes is None:
        return []
    return [outcomes] if isinstance(outcomes, dict) else list(outcomes)


def _unchecked(stores: list[str], outcomes: list[dict]) -> list[str]:
    done = {o["store"] for o in outcomes}
    return [s for s in stores if s not in done]


# decide and alert run whatever became of the stores' checks, once the list of stores was made
# (ALL_DONE_MIN_ONE_SUCCESS): a store whose checks failed (a path that vanished, a Spark job that died) must
# not silence the alert about another one.
@task.branch(trigger_rule=TriggerRule.ALL_DONE_MIN_ONE_SUCCESS)
def decide(stores: list[str], outcomes) -> str:
    done = _each(outcomes)
    return "alert" if outcome.needs_alert(done) or _unchecked(stores, done) else "all_clear"


@task(trigger_rule=TriggerRule.ALL_DONE_MIN_ONE_SUCCESS, on_success_callback=ALERT_NOTIFIERS)
def alert(stores: list[str], outcomes) -> dict:
    """The alert: its title, text and report file, for the notifiers (which run once this returns)."""
    ctx = get_current_context()
    done = _each(outcomes)
    unchecked = _unchecked(stores, done)
    # the run's folder made again rather than taken from plan: as an upstream, plan's success would let this
    # run when the list of stores failed
    run = config.run_dir(config.output_dir(ctx["params"], _variable), ctx["run_id"])
    return {"title": report.alert_title(done, unchecked), "text": report.alert_text(done, unchecked, ctx["run_id"]),
            "report": str(run / "alert.txt")}


# ALL_DONE: one of alert and all_clear is always skipped. The run's state is its last task's: this one fails
# it whenever something before did (a failed task that is not last leaves a run green in Airflow).
@task(trigger_rule=TriggerRule.ALL_DONE)
def checks_complete(stores: list[str] | None, outcomes) -> None:
    """Fails the run, after the alert, when a store's checks did not finish: the run shows red in Airflow."""
    if stores is None:
        raise AirflowFailException("no stores were checked: see the plan and store_paths task logs")
    unchecked = _unchecked(stores, _each(outcomes))
    if unchecked:
        raise AirflowFailException(f"the checks of {len(unchecked)} store(s) did not finish (see the "
                                   f"store_checks task logs): {', '.join(unchecked)}")


@dag(dag_id="rocketstore_store_audit", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False,
     max_active_runs=1, tags=["rocketmq", "rocketstore"], doc_md=__doc__,
     params={
         "stores": Param([], type="array", items={"type": "string"},
                         description="store paths (relative: from rocketstore_home); empty: the Variable "
                                     "rocketstore_stores"),
         "rocketstore_home": Param("", type="string", description="rocketstore-spark checkout (make setup "
                                   "done); empty: the Variable rocketstore_home, else $ROCKETSTORE_HOME"),
         "rocketstore_venv": Param("", type="string", description="its virtualenv; empty: <home>/.venv"),
         "output_dir": Param("", type="string", description="documents and reports; empty: the Variable "
                             "rocketstore_output_dir, else $AIRFLOW_HOME/rocketstore"),
         "ingest_table": Param("", type="string", description="Delta table for jobs/ingest.py; empty: no ingest"),
         "scrub_state": Param("", type="string", description="directory of the incremental scrub's state (a "
                              "file per store; outside the stores): the audit scans only what changed and a "
                              "rotating share; empty: the full audit"),
         "max_lag": Param(100_000, type="integer", minimum=0,
                          description="alert when a consumer queue is more messages behind than this"),
     })
def rocketstore_store_audit():
    settings = plan()
    stores = store_paths(settings["home"])
    outcomes = store_checks.partial(settings=settings, wanted=ingest_wanted(settings["ingest_table"])) \
        .expand(store=stores)
    ends = [alert(stores, outcomes), EmptyOperator(task_id="all_clear")]
    decide(stores, outcomes) >> ends >> checks_complete(stores, outcomes)


rocketstore_store_audit()
