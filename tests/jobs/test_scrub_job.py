"""jobs/scrub.py and the findings history with a real local Spark session: the segment scans run as Spark
tasks and the answer is the full audit's; each run appends its findings and a row per store to the Delta
tables; the README's Spark SQL over them (trends, new findings, time travel) runs and says what it claims."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from jobs import scrub as job
from rocketstore_spark.report.audit import audit_stores
from rocketstore_spark.store.discovery import discover
from tests.cli.helpers import run as cli
from tests.golden.goldens import BY_ID

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def readme_sql() -> list[str]:
    text = (ROOT / "README.md").read_text()
    sql = re.search(r"## The nightly audit: incremental scrub and findings history.*?```sql\n(.*?)```", text,
                    re.S).group(1)
    return [s.strip() for s in re.sub(r"--[^\n]*", "", sql).split(";") if s.strip()]


@pytest.mark.long
def test_scrub_job_history_and_the_readme_queries(spark, tmp_path, capsys):
    damaged, clean = BY_ID["4.9.8/corrupt-body"], BY_ID["5.5.1/clean"]
    state, history, doc = tmp_path / "state.json", tmp_path / "history", tmp_path / "scrub.json"
    argv = ["--store", str(damaged.store), "--store", str(clean.store), "--state", str(state),
            "--history", str(history)]
    assert job.main(spark, argv + ["--json", str(doc)]) == 3
    out = capsys.readouterr().out
    assert f"{damaged.store}: PROBLEMS FOUND (scrub run 1, rotation 28 runs)" in out
    assert f"{clean.store}: healthy (scrub run 1" in out
    entries = json.loads(doc.read_text())["stores"]
    want = audit_stores(discover(str(damaged.store)) + discover(str(clean.store))).docs
    for got, full in zip(entries, want):
        assert Counter(json.dumps(f, sort_keys=True) for f in got["findings"]) == \
            Counter(json.dumps(f, sort_keys=True) for f in full["findings"])
        assert got["recovery"] == json.loads(json.dumps(full["recovery"], default=str))
    assert job.main(spark, argv) == 3                                     # nothing changed: carried over
    assert "cross-checks carried over" in capsys.readouterr().out
    # a full audit appends to the same tables
    r = cli("audit", clean.store, "--history", history)
    assert r.exit_code == 0, r.output

    runs = spark.read.format("delta").load(f"{history}/audit_runs").orderBy("run_time", "store").collect()
    assert [(r.mode, r.cross_checks) for r in runs] == [("scrub", "run")] * 2 + [("scrub", "carried")] * 2 + \
        [("audit", "run")]
    assert len({r.run_id for r in runs}) == 3
    first = [r for r in runs if r.run_id == runs[0].run_id]
    errors = {e["store"]: sum(f["severity"] == "error" for f in e["findings"]) for e in entries}
    assert {r.store: r.errors for r in first} == errors and errors[str(damaged.store)] > 0
    assert runs[-1].segments == runs[-1].segments_checked == len(discover(str(clean.store))[0].segments)
    findings = spark.read.format("delta").load(f"{history}/findings")
    assert findings.where(f"run_id = '{runs[0].run_id}'").count() == sum(len(e["findings"]) for e in entries)

    statements = [s.replace("/tmp/history", str(history)) for s in readme_sql()]
    trend, new, travel, described = [spark.sql(s).collect() for s in statements]
    assert {r.store for r in trend} == {str(damaged.store), str(clean.store)}
    assert max(r.errors for r in trend if r.store == str(damaged.store)) == errors[str(damaged.store)]
    assert sum(r.segments_scanned for r in trend) == sum(r.segments_checked for r in runs)
    # the latest run (the clean store's full audit) found nothing its predecessor did not
    assert new == []
    assert sorted((r.store, r.mode, r.errors) for r in travel) == sorted(
        (r.store, r.mode, r.errors) for r in first)                      # version 0: the first run only
    assert len(described) == 3                                            # three appends


def test_rocketstore_ingest_is_the_job_on_a_local_session(spark, tmp_path):
    """`rocketstore ingest` (the CLI over spark.ingest.ingest_stores, as the job): the store's messages, then
    nothing new; a table inside the store is refused."""
    g = BY_ID["5.5.1/consumer-offsets"]
    table = tmp_path / "table"
    r = cli("ingest", g.store, "--table", table, "--no-snapshots")
    assert r.exit_code == 0, r.output
    assert f"{g.store}: {len(g.messages)} message(s) ingested" in r.stdout
    assert spark.read.format("delta").load(str(table)).count() == len(g.messages)
    r = cli("ingest", g.store, "--table", table, "--json", "--no-snapshots")
    assert r.exit_code == 0 and json.loads(r.stdout)["stores"][0]["status"] == "unchanged"
    r = cli("ingest", g.store, "--table", g.store / "table")
    assert r.exit_code == 2 and "inside the store" in r.stderr
    assert spark.sparkContext._jsc is not None                       # the test's session still runs
