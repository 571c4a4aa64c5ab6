"""The DAG's plain-Python helpers (jobs/airflow/rocketstore_airflow/), in .venv with no Airflow: the verdict
of a store from the CLI's own documents, what counts as a new finding, the settings, the alert's text, and
the launcher that turns a job's exit 3 into a recorded answer."""
from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import zipfile

import pytest

from rocketstore_airflow import config, outcome, report, seen
from tests.airflow.conftest import DAGS
from tests.cli.helpers import run
from tests.golden.goldens import BY_ID


@functools.cache
def _cli_json(golden_id: str) -> tuple[str, str]:
    store = BY_ID[golden_id].store
    return run("audit", store, "--json").stdout, run("offsets", store, "--json").stdout


def documents(golden_id: str) -> tuple[dict, dict]:
    """``rocketstore audit --json`` and ``rocketstore offsets --json`` of a sample store (fresh copies)."""
    return tuple(json.loads(doc) for doc in _cli_json(golden_id))


STATUSES = {"audit": 3, "offsets": 0, "ingest": None, "summary": 3}


def test_a_clean_store_has_nothing_to_alert_on():
    audit, offsets = documents("5.5.1/clean")
    o = outcome.store_outcome("s", audit, offsets, set(), 0, STATUSES)
    assert o["reasons"] == [] and o["errors"] == 0 and not outcome.needs_alert([o])


def test_damage_alerts_once_as_new_and_every_night_as_data_at_risk():
    g = BY_ID["5.5.1/corrupt-body"]
    audit, offsets = documents(g.id)
    first = outcome.store_outcome("s", audit, offsets, set(), 100_000, STATUSES)
    lost = sum(m["physical_offset"] > g.manifest["recovery"]["commitlog_max_offset"] and m["body_crc_ok"]
               for m in g.messages)
    assert first["reasons"] == [f"data at risk: a restart now would lose {lost} message(s) and leave 0 unreachable",
                                "2 new error finding(s)"]
    assert sorted(f["physical_offset"] for f in first["new_errors"]) == sorted(
        s["physical_offset"] for s in g.manifest["surgery"])
    again = outcome.store_outcome("s", audit, offsets, set(first["error_keys"]), 100_000, STATUSES)
    assert again["reasons"] == first["reasons"][:1] and again["new_errors"] == []


def test_a_store_whose_only_errors_are_known_raises_nothing():
    audit, offsets = documents("5.5.1/corrupt-body")
    for s in audit["stores"]:
        s["recovery"]["lost"]["messages"] = 0           # the same findings, nothing a restart would lose
    keys = {outcome.finding_key(f) for f in outcome.error_findings(audit)}
    assert outcome.store_outcome("s", audit, offsets, keys, 0, STATUSES)["reasons"] == []


def test_consumer_lag_over_the_threshold_alerts_naming_the_queues():
    audit, offsets = documents("5.5.1/consumer-offsets")
    lags = sorted(q["lag"] for q in offsets["queues"] if q["lag"] is not None)
    o = outcome.store_outcome("s", audit, offsets, set(), 30, STATUSES)
    behind = [q for q in offsets["queues"] if (q["lag"] or 0) > 30]
    assert o["reasons"] == [f"consumer lag over 30 message(s) in {len(behind)} queue(s) (worst {lags[-1]})"]
    assert [q["lag"] for q in o["lagging"]] == sorted((q["lag"] for q in behind), reverse=True)
    assert outcome.store_outcome("s", audit, offsets, set(), lags[-1], STATUSES)["reasons"] == []
    text = report.alert_text([{**o, "audit_json": "a.json", "summary_txt": None}], [], "run-1")
    q = o["lagging"][0]
    assert f"{q['consumer_group']} on {q['topic']} queue {q['queue_id']}: {q['lag']:,} message(s) behind" in text


def test_a_retried_run_still_sees_its_findings_as_new(tmp_path):
    state = tmp_path / "seen" / "s.json"
    assert seen.seen_before(state, "run-1") == set()
    seen.remember(state, "run-1", ["a", "b"], set())
    # the same run again (a retry of evaluate) compares with the run before it, not with its own first try
    assert seen.seen_before(state, "run-1") == set()
    assert seen.seen_before(state, "run-2") == {"a", "b"}
    seen.remember(state, "run-2", ["b", "c"], {"a", "b"})
    assert seen.seen_before(state, "run-2") == {"a", "b"} and seen.seen_before(state, "run-3") == {"b", "c"}


def test_settings_come_from_params_then_variables_then_defaults(tmp_path):
    root = DAGS.parents[1]
    variables = {"rocketstore_home": str(root), "rocketstore_stores": '["tests/golden/rocketmq-5.5.1/clean/store"]'}
    home, venv = config.home_and_venv({}, variables.get)
    assert (home, venv) == (root, root / ".venv")
    assert config.stores({}, variables.get, home) == [str(BY_ID["5.5.1/clean"].store)]
    given = str(BY_ID["4.9.8/clean"].store)
    assert config.stores({"stores": [given, given]}, variables.get, home) == [given]
    assert config.output_dir({}, {}.get, {"AIRFLOW_HOME": str(tmp_path)}) == tmp_path / "rocketstore"
    assert config.output_dir({"output_dir": str(tmp_path / "o")}, variables.get) == tmp_path / "o"
    with pytest.raises(config.SettingError, match="no rocketstore-spark checkout"):
        config.home_and_venv({}, {}.get, env={})
    with pytest.raises(config.SettingError, match="does not exist"):
        config.home_and_venv({"rocketstore_home": str(tmp_path)}, {}.get)
    with pytest.raises(config.SettingError, match="no stores"):
        config.stores({}, {}.get, home)


def test_store_names_and_run_folders_are_file_names():
    a, b = str(BY_ID["5.5.1/clean"].store), str(BY_ID["4.9.8/clean"].store)
    assert config.store_slug(a).startswith("clean_store-") and config.store_slug(a) != config.store_slug(b)
    assert config.run_dir(DAGS, "manual__2026-01-01T00:00:00+00:00").name == "manual__2026-01-01T00_00_00_00_00"


def test_spark_submit_gets_what_spark_submit_sh_gives_a_job(tmp_path):
    root = DAGS.parents[1]
    zipped = config.package_zip(root, tmp_path / "rocketstore_spark.zip")
    names = zipfile.ZipFile(zipped).namelist()
    assert "rocketstore_spark/__init__.py" in names and not any("__pycache__" in n for n in names)
    args = config.spark_submit(root, root / ".venv", zipped)
    assert args["properties_file"] == str(root / "conf" / "spark-defaults.conf")
    assert args["jars"].split(",") == [str(j) for j in sorted((root / "jars").glob("*.jar"))]
    assert args["env_vars"]["PATH"].startswith(str(root / ".venv" / "bin"))
    assert args["env_vars"]["PYSPARK_PYTHON"] == str(root / ".venv" / "bin" / "python")


@pytest.mark.parametrize("job_exit, task_exit, recorded", [(0, 0, "0\n"), (3, 0, "3\n"), (2, 2, None), (1, 1, None)])
def test_spark_answer_records_0_and_3_and_fails_on_the_rest(tmp_path, job_exit, task_exit, recorded):
    job = tmp_path / "job.py"
    job.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(int(sys.argv[-1]))\n")
    status, out = tmp_path / "status", tmp_path / "out.txt"
    proc = subprocess.run([sys.executable, str(DAGS / "rocketstore_airflow" / "spark_answer.py"), "--status",
                           str(status), "--stdout", str(out), "--", str(job), "--store", "x", str(job_exit)],
                          capture_output=True, text=True)
    assert proc.returncode == task_exit
    assert (status.read_text() if status.exists() else None) == recorded
    assert out.read_text() == proc.stdout == f"args ['--store', 'x', '{job_exit}']\n"


def test_the_readme_names_the_pins_params_and_variables_the_dag_has():
    root = DAGS.parents[1]
    readme = (root / "README.md").read_text()
    section = readme.split("## Nightly checks with Airflow\n")[1].split("\n## ")[0]
    pins = dict(line.split("==") for line in (DAGS / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for name in ("apache-airflow", "apache-airflow-providers-apache-spark"):
        assert f"{name} {pins[name]}" in section
    params = re.findall(r'"(\w+)": Param\(', (DAGS / "rocketstore_store_audit.py").read_text())
    assert len(params) == 7 and all(f"`{p}`" in section or f'"{p}"' in section for p in params), params
    for variable in ("rocketstore_home", "rocketstore_stores", "rocketstore_output_dir", "rocketstore_venv"):
        assert variable in section and variable in (DAGS / "rocketstore_airflow" / "config.py").read_text()
