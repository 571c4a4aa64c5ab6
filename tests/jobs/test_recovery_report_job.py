"""jobs/recovery_report.py: the report without Spark (exit status, JSON), and the lost messages exported with a
real local Spark session."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import recovery_report as job
from tests.golden.goldens import BY_ID

ROOT = Path(__file__).resolve().parents[2]


def run(*argv):
    return subprocess.run([sys.executable, "jobs/recovery_report.py", *argv], cwd=ROOT, capture_output=True, text=True)


def test_a_clean_store_loses_nothing_and_needs_no_jvm(tmp_path):
    proc = run("--store", str(BY_ID["5.5.1/clean"].store), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["document_version"] == 1 and doc["shutdown"] == "normal" and doc["lost"]["messages"] == 0
    assert "Nothing valid would be lost." in proc.stderr and "Using Spark" not in proc.stderr


def test_a_torn_tail_exits_3_and_names_the_stop(tmp_path):
    g = BY_ID["5.5.1/torn-tail"]
    proc = run("--store", str(g.store), "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 3, proc.stderr
    [cut] = g.manifest["surgery"]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["stop"]["file"] == cut["file"] and doc["process_offset"] == g.manifest["recovery"]["commitlog_max_offset"]
    assert f"it stops at {cut['file']} byte {doc['stop']['file_position']:,}" in proc.stdout


def test_bad_arguments_exit_2_in_one_line(tmp_path):
    for argv in (["--store", str(tmp_path / "nope")], ["--store", str(BY_ID["5.5.1/clean"].store),
                                                       "--release-family", "9.x"]):
        proc = run(*argv)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.mark.spark
def test_lost_messages_are_exported_with_every_column(spark, tmp_path, capsys):
    g = BY_ID["4.9.8/corrupt-body"]
    out = tmp_path / "lost"
    assert job.main(spark, ["--store", str(g.store), "--lost-output", str(out)]) == 3
    po = g.manifest["recovery"]["commitlog_max_offset"]
    want = sorted(m["physical_offset"] for m in g.messages if m["physical_offset"] >= po and m["body_crc_ok"])
    rows = spark.read.format("delta").load(str(out)).select("physical_offset", "body").collect()
    assert sorted(r.physical_offset for r in rows) == want and all(r.body is not None for r in rows)
