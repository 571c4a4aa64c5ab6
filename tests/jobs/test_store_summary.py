"""jobs/store_summary.py on golden stores, with a real local Spark session."""
from collections import Counter

import pytest

from jobs import store_summary
from tests.golden.goldens import all_goldens

pytestmark = pytest.mark.spark

BY_ID = {g.id: g for g in all_goldens()}


def test_store_summary_reports_damage_and_writes_delta(spark, tmp_path, capsys):
    g = BY_ID["4.9.8/corrupt-body"]
    code = store_summary.main(spark, ["--store", str(g.store), "--output", str(tmp_path)])
    assert code == 3                                       # two flipped body bytes: damage found
    assert "with damage or CRC failures" in capsys.readouterr().out
    topics = {r.topic: r.messages for r in spark.read.format("delta").load(str(tmp_path / "topics")).collect()}
    assert topics == Counter(m["topic"] for m in g.messages)
    segments = spark.read.format("delta").load(str(tmp_path / "segments")).collect()
    assert sum(r.crc_failures for r in segments) == 2


def test_store_summary_clean_store_exits_zero(spark):
    assert store_summary.main(spark, ["--store", str(BY_ID["5.5.1/clean"].store)]) == 0


def test_a_bad_store_path_fails_fast_before_spark_starts():
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "jobs/store_summary.py", "--store", "/nope"], cwd=root,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "store_summary: /nope: no such file or directory"
    assert "Traceback" not in proc.stderr and "SparkContext" not in proc.stderr
