"""jobs/store_summary.py on golden stores, with a real local Spark session."""
import re
from collections import Counter

import pytest

from jobs import store_summary
from tests.golden.goldens import BY_ID

pytestmark = pytest.mark.spark



def test_store_summary_reports_damage_and_writes_delta(spark, tmp_path, capsys):
    g = BY_ID["4.9.8/corrupt-body"]
    code = store_summary.main(spark, ["--store", str(g.store), "--output", str(tmp_path)])
    assert code == 3                                       # two flipped body bytes: damage found
    out = capsys.readouterr().out
    flipped = sorted(s["physical_offset"] for s in g.manifest["surgery"])
    # each finding printed with its check id, file and byte position, and its physical offset
    for offset in flipped:
        assert re.search(rf"error +commitlog\.body_crc +commitlog/\d{{20}} +[\d,]+ +{offset:,} ", out), out
    assert "health: 2 error(s), 0 warning(s), 2 BODYCRC failure(s)" in out
    topics = {r.topic: r.messages for r in spark.read.format("delta").load(str(tmp_path / "topics")).collect()}
    assert topics == Counter(m["topic"] for m in g.messages)
    segments = spark.read.format("delta").load(str(tmp_path / "segments")).collect()
    assert sum(r.crc_failures for r in segments) == 2
    findings = spark.read.format("delta").load(str(tmp_path / "findings")).collect()
    assert sorted((f.check, f.physical_offset) for f in findings) == [("commitlog.body_crc", o) for o in flipped]


def test_store_summary_clean_store_shows_every_segment_and_exits_zero(spark, capsys):
    g = BY_ID["5.5.1/clean"]
    assert store_summary.main(spark, ["--store", str(g.store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Store {g.store}\n") and "health: healthy" in out and "Findings" not in out
    for seg in g.manifest["segments"]:
        assert re.search(rf"^  {seg['file']} +{seg['records']:,} ", out, re.M), (seg, out)
    assert max(len(line) for line in out.splitlines()) <= 160


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
