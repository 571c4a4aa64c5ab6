"""jobs/rebuild.py with a real local Spark session: the Spark rebuild writes what RocketMQ wrote."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import rebuild as job
from tests.golden.goldens import BY_ID
from tests.store_files import tree_bytes

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_the_spark_rebuild_is_rocketmqs_own_rebuild(spark, tmp_path, capsys):
    g = BY_ID["5.5.1/clean"]
    assert job.main(spark, ["--store", str(g.store), "--output", str(tmp_path / "out")]) == 0
    expected = g.store.parent / "expected-rebuild"
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(expected / "consumequeue")
    assert [p.read_bytes() for p in sorted((tmp_path / "out" / "index").iterdir())] == \
        [p.read_bytes() for p in sorted((expected / "index").iterdir())]
    out = capsys.readouterr().out
    assert "the IndexFiles hold topic#T#TAGS keys: 5.4.0 or later" in out
    assert f"{len(tree_bytes(expected / 'consumequeue'))} ConsumeQueue file(s), 6 IndexFile(s) written" in out


def test_a_lagging_store_exits_3_and_shows_where_its_queues_differ(spark, tmp_path, capsys):
    g = BY_ID["4.9.8/cq-lag-clean"]
    assert job.main(spark, ["--store", str(g.store), "--output", str(tmp_path / "out"),
                            "--differences", str(tmp_path / "diff")]) == 3
    out = capsys.readouterr().out
    cut = [s for s in g.manifest["surgery"] if s["action"] == "zero_cq_entries"]
    deleted = [s for s in g.manifest["surgery"] if s["action"] == "delete_file"]
    assert deleted and f"{len(cut) + len(deleted)} differ" in out
    for s in deleted:
        assert re.search(rf"consumequeue +- +{re.escape(s['file'])} +only_rebuilt", out), out
    for s in cut:
        queue_offset = (int(s["file"].rsplit("/", 1)[1]) + s["file_position"]) // 20
        assert re.search(rf"{re.escape(s['file'])} +{re.escape(s['file'])} +differs +first difference at queue "
                         rf"offset {queue_offset}: store \(0, 0, 0\)", out), out
    # the same comparison as a Delta table: one row per file pair
    rows = {r.store_file or r.rebuilt_file: r for r in spark.read.format("delta").load(str(tmp_path / "diff")).collect()}
    for s in cut:
        r = rows[s["file"]]
        _, topic, queue_id, name = s["file"].split("/")
        assert (r.status, r.topic, r.queue_id, r.first_queue_offset, r.entries_missing, r.entries_extra) == (
            "differs", topic, int(queue_id), (int(name) + s["file_position"]) // 20, s["entries_removed"], 0)
    assert {rows[s["file"]].status for s in deleted} == {"only_rebuilt"}
    assert sum(r.status != "identical" for r in rows.values()) == len(cut) + len(deleted)


def test_an_output_inside_the_store_is_refused_before_spark_starts():
    store = BY_ID["5.5.1/clean"].store
    proc = subprocess.run([sys.executable, "jobs/rebuild.py", "--store", str(store), "--output", str(store / "x")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("rebuild: ") and "inside the store" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_index_files_built_in_parallel_from_many_partitions_are_rocketmqs(spark, tmp_path):
    # 16 KiB partitions cut segments anywhere: IndexFile boundaries fall inside partitions and between the keys
    # of one record, and each file is written by its own task
    from rocketstore_spark.spark.rebuild import rebuild
    g = BY_ID["4.9.8/clean"]
    result = rebuild(spark, str(g.store), tmp_path / "out", split_size=16384)
    expected = g.store.parent / "expected-rebuild"
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(expected / "consumequeue")
    assert [p.read_bytes() for p in sorted((tmp_path / "out" / "index").iterdir())] == \
        [p.read_bytes() for p in sorted((expected / "index").iterdir())]
    assert {d.status for d in result.differences} == {"identical"} and not result.findings


def test_a_store_whose_index_fits_one_file_is_rebuilt(spark, tmp_path):
    # RocketMQ's default geometry (20,000,000 entries) holds the whole sample: one IndexFile, without a preset
    from rocketstore_spark.spark.rebuild import rebuild
    g = BY_ID["5.5.1/clean"]
    result = rebuild(spark, str(g.store), tmp_path / "out",
                     {"maxHashSlotNum": 5_000_000, "maxIndexNum": 20_000_000}, allow_conflicts=True)
    assert len(result.index_files) == 1
    keys = sum(len(m["index_keys"]) for m in g.messages)
    from rocketstore_spark.store.indexes import read_index_file
    view = read_index_file(str(tmp_path / "out" / "index" / result.index_files[0]), 5_000_000)
    assert view.header["index_count"] == keys + 1 and view.entry_count == keys
    from rocketstore_spark.rebuild.output import rebuild_store
    alone = rebuild_store(str(g.store), tmp_path / "alone", options={"maxHashSlotNum": 5_000_000,
                                                                     "maxIndexNum": 20_000_000}, allow_conflicts=True)
    assert (tmp_path / "alone" / "index" / alone.index_files[0]).read_bytes() == \
        (tmp_path / "out" / "index" / result.index_files[0]).read_bytes()


def test_on_a_damaged_log_the_spark_rebuild_follows_the_release_and_resync_lists_the_rest(spark, tmp_path, capsys):
    # 4.9.8/corrupt-window: a crash recovery from segment 131,072 to the flipped byte at 525,101 (RocketMQ's
    # restart of a copy: the manifest), then the reput; 16 KiB partitions cut both ranges anywhere
    from rocketstore_spark.rebuild.output import rebuild_store
    from rocketstore_spark.spark.rebuild import rebuild
    g = BY_ID["4.9.8/corrupt-window"]
    d = g.manifest["recovery"]["dispatched_during_load"]
    for resync in (False, True):
        alone = rebuild_store(str(g.store), tmp_path / f"alone-{resync}", resync=resync)
        result = rebuild(spark, str(g.store), tmp_path / f"spark-{resync}", split_size=16384, resync=resync)
        assert tree_bytes(tmp_path / f"spark-{resync}") == tree_bytes(tmp_path / f"alone-{resync}")
        assert result.restart.ranges[0] == (d["first_physical_offset"], d["end_physical_offset"], "recovery")
        assert result.beyond == alone.beyond and bool(result.beyond) == resync
        assert [x.as_row() for x in result.differences] == [x.as_row() for x in alone.differences]
    args = ["--store", str(g.store), "--output", str(tmp_path / "job"), "--resync", "--differences", str(tmp_path / "diff")]
    assert job.main(spark, args) == 3
    out = capsys.readouterr().out
    assert "Resynchronised (--resync)" in out and "own rebuild does not write" in out
    rows = spark.read.format("delta").load(str(tmp_path / "diff")).where("kind = 'beyond_release'").collect()
    assert {(r.topic, r.queue_id, r.entries_missing) for r in rows} == \
        {(t, q, span[0]) for (t, q), span in result.beyond.items()}
    # a reput range after the recovery's: its scan puts no index key below the last one put before it
    from tests.rebuild.test_rebuild_release import crashed_with_prepared_tail
    store, options, _ = crashed_with_prepared_tail(tmp_path / "prepared", "4.9.8")
    alone = rebuild_store(str(store), tmp_path / "prepared-alone", options=options)
    result = rebuild(spark, str(store), tmp_path / "prepared-spark", options, split_size=512)
    assert len(result.restart.ranges) == 2 and result.restart.ranges[1][1] > result.restart.ranges[1][0]
    assert tree_bytes(tmp_path / "prepared-spark") == tree_bytes(tmp_path / "prepared-alone")
