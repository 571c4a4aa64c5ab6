"""jobs/verify.py and spark.verify with a real local Spark session: the distributed verify finds exactly what
the in-process one finds, on all golden stores at once; the job's report, JSON, Delta tables and reset plan."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import verify as job
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import BY_ID, GOLDENS

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


LMQ = sorted((ROOT / "tests" / "golden" / "lmq-5.5.1").glob("*/store"))     # LMQ multi-dispatch (#30)


def _key(f) -> str:
    return json.dumps(f.as_row(), sort_keys=True)         # (evidence comes back from Spark as a map: any order)


def test_spark_verify_of_every_golden_at_once_equals_the_in_process_verify(spark):
    from rocketstore_spark.spark.verify import verify
    stores = [g.store for g in GOLDENS] + LMQ
    run = verify(spark, [str(s) for s in stores], split_size=64 << 10)
    assert len(run.stores) == len(stores) and len(LMQ) == 4
    for rep, store in zip(run.stores, stores):
        ref = verify_store(str(store))
        assert sorted(map(_key, rep.findings)) == sorted(map(_key, ref.findings)), store
        assert [(q["topic"], q["queue_id"], q["min_offset"], q["max_offset"], q["records"]) for q in rep.queues] == \
            [(q.topic, q.queue_id, q.min_offset, q.max_offset, q.records) for q in ref.queues]
        assert rep.records == sum(s.records for _, s in ref.segments)
        lags = {(x.consumer_group, x.topic, x.queue_id): (x.max_offset, x.status) for x in rep.offsets.lags}
        assert lags == {(x.consumer_group, x.topic, x.queue_id): (x.max_offset, x.status) for x in ref.offsets.lags}
    # the %LMQ% queues met their multi-dispatch entries; on the torn store the entries of a record whose
    # properties no longer name the queues are findings, in both
    lmq = run.stores[len(GOLDENS):]
    assert all(any(q["topic"].startswith("%LMQ%") and q["records"] for q in rep.queues) for rep in lmq)
    torn = lmq[[s.parent.name for s in LMQ].index("torn")]
    assert any(f.topic and f.topic.startswith("%LMQ%") and f.check == "consumequeue.entry_mismatch"
               for f in torn.findings)


def test_job_reports_json_delta_and_a_reset_plan(spark, tmp_path, capsys):
    offsets, corrupt = BY_ID["5.5.1/consumer-offsets"], BY_ID["4.9.8/corrupt-body"]
    argv = ["--store", str(offsets.store), "--store", str(corrupt.store), "--json", str(tmp_path / "v.json"),
            "--output", str(tmp_path / "delta"), "--reset-file", str(tmp_path / "plan.csv")]
    assert job.main(spark, argv) == 3
    out = capsys.readouterr().out
    for s in corrupt.manifest["surgery"]:
        record = next(r for r in corrupt.messages
                      if r["physical_offset"] <= s["physical_offset"] < r["physical_offset"] + r["total_size"])
        assert re.search(rf"error +commitlog\.body_crc +{s['file']} +{record['file_position']:,} +"
                         rf"{record['physical_offset']:,} ", out), out
    doc = json.loads((tmp_path / "v.json").read_text())
    assert doc["document_version"] == 1 and [s["store"] for s in doc["stores"]] == \
        [str(offsets.store), str(corrupt.store)]
    assert {f["check"] for f in doc["stores"][1]["findings"] if f["severity"] != "info"} == \
        {"commitlog.body_crc", "store.abort_present"}
    statuses = {(q["consumer_group"], q["topic"], q["queue_id"]): q["status"]
                for q in doc["stores"][0]["consumer_offsets"]["queues"]}
    # as-broker: only the offsets out of range move, to the bound the broker would use
    plan = list(csv.DictReader((tmp_path / "plan.csv").open()))
    bounds = {(q["topic"], q["queue_id"]): q for q in offsets.manifest["queues"]}
    assert {(p["consumer_group"], p["topic"], int(p["queue_id"])) for p in plan} == \
        {k for k, s in statuses.items() if s in ("below_min", "beyond_max")}
    for p in plan:
        b = bounds[(p["topic"], int(p["queue_id"]))]
        assert int(p["new_offset"]) == (b["min_offset"] if int(p["current_offset"]) < b["min_offset"]
                                        else b["max_offset"])
    assert doc["reset_plan"]["queues"] == [{**p, "queue_id": int(p["queue_id"]),
                                            "current_offset": int(p["current_offset"]),
                                            "new_offset": int(p["new_offset"])} for p in plan]
    # a second run appends, with its own run id
    assert job.main(spark, ["--store", str(corrupt.store), "--output", str(tmp_path / "delta")]) == 3
    findings = spark.read.format("delta").load(str(tmp_path / "delta" / "findings"))
    runs = findings.select("run_id").distinct().count()
    assert runs == 2
    crc = findings.where("check = 'commitlog.body_crc'").select("physical_offset").collect()
    assert sorted(r.physical_offset for r in crc) == sorted(2 * [r["physical_offset"] for r in
                                                                 (next(m for m in corrupt.messages if m["physical_offset"]
                                                                       <= s["physical_offset"] < m["physical_offset"]
                                                                       + m["total_size"])
                                                                  for s in corrupt.manifest["surgery"])])
    lag = spark.read.format("delta").load(str(tmp_path / "delta" / "consumer_lag")).collect()
    assert {(r.consumer_group, r.topic, r.queue_id): r.status for r in lag} == statuses


def test_job_shift_and_datetime_plans(spark, tmp_path, capsys):
    g = BY_ID["5.5.1/consumer-offsets"]
    assert job.main(spark, ["--store", str(g.store), "--reset-plan", "shift-by", "--reset-value", "-2",
                            "--reset-group", "golden_in_range", "--json", str(tmp_path / "a.json")]) == 3
    plan = json.loads((tmp_path / "a.json").read_text())["reset_plan"]["queues"]
    bounds = {(q["topic"], q["queue_id"]): q for q in g.manifest["queues"]}
    assert plan and all(p["consumer_group"] == "golden_in_range" for p in plan)
    for p in plan:
        assert p["new_offset"] == max(p["current_offset"] - 2, bounds[(p["topic"], p["queue_id"])]["min_offset"])
    # to-datetime: the first message of each queue stored at or after the time (RocketMQ's store times)
    when = sorted(m["store_timestamp"] for m in g.messages if m["topic"] == "TopicTest")[100]
    iso = __import__("datetime").datetime.fromtimestamp(when / 1000, __import__("datetime").timezone.utc).isoformat()
    assert job.main(spark, ["--store", str(g.store), "--reset-plan", "to-datetime", "--reset-value", iso,
                            "--reset-group", "golden_in_range", "--json", str(tmp_path / "b.json")]) == 3
    for p in json.loads((tmp_path / "b.json").read_text())["reset_plan"]["queues"]:
        b = bounds[(p["topic"], p["queue_id"])]
        later = [m["queue_offset"] for m in g.messages if m["topic"] == p["topic"] and m["queue_id"] == p["queue_id"]
                 and m["store_timestamp"] >= when and b["min_offset"] <= m["queue_offset"] < b["max_offset"]]
        assert p["new_offset"] == min(later, default=b["max_offset"])


def test_clean_store_exits_zero(spark, capsys):
    assert job.main(spark, ["--store", str(BY_ID["5.5.1/propcrc"].store)]) == 0
    assert "verdict: info" in capsys.readouterr().out


def test_bad_arguments_fail_before_spark_starts(tmp_path):
    for argv, message in ((["--store", str(tmp_path / "nope")], "verify: "),
                          (["--store", str(BY_ID["5.5.1/clean"].store), "--reset-plan", "shift-by"],
                           "needs --reset-value")):
        proc = subprocess.run([sys.executable, "jobs/verify.py", *argv], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
