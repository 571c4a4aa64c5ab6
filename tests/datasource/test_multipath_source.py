"""The ``rocketmq`` and ``rocketmq_segments`` sources over a multi-path CommitLog (option ``storePathCommitLog``):
RocketMQ's golden store written over two directories (tests/golden/multipath-5.5.1) reads as RocketMQ reads it,
one log, physical offsets as RocketMQ reports them; without the option the store root alone says what it lacks."""
from __future__ import annotations

import pytest

from tests.store.test_multipath import ROOT, broker_conf, dirs, manifest

pytestmark = pytest.mark.spark


def test_the_rocketmq_source_reads_one_log_over_both_directories(spark):
    folder = ROOT / "crash"
    df = (spark.read.format("rocketmq").option("storePathCommitLog", ",".join(dirs(folder)))
          .option("splitSize", 64 << 10).load(str(folder / "store")))
    got = sorted(tuple(r) for r in df.select("physical_offset", "topic", "queue_id", "queue_offset", "total_size",
                                             "body_crc_ok", "msg_id").collect())
    want = sorted((m["physical_offset"], m["topic"], m["queue_id"], m["queue_offset"], m["total_size"],
                   m["body_crc_ok"], m["msg_id"]) for m in manifest("crash")["messages"])
    assert got == want


def test_the_segments_source_lists_the_directories_and_without_them_says_what_it_lacks(spark):
    folder = ROOT / "crash"
    rows = (spark.read.format("rocketmq_segments").option("storePathCommitLog", ",".join(dirs(folder)))
            .load(str(folder / "store")).collect())
    segs = {r.segment: r.records for r in rows if r.segment is not None}
    assert segs == {s["file"]: s["records"] for s in manifest("crash")["segments"]}
    alone = spark.read.format("rocketmq_segments").load(str(folder / "store")).collect()
    checks = {f.check for r in alone for f in r.findings}
    assert {"commitlog.multipath_suspected", "commitlog.gap"} <= checks
    assert sum(r.records for r in alone) < len(manifest("crash")["messages"])


def test_the_spark_rebuild_given_broker_conf_writes_what_rocketmq_wrote(spark, tmp_path):
    from rocketstore_spark.spark.rebuild import rebuild
    folder = ROOT / "clean"
    r = rebuild(spark, str(folder / "store"), tmp_path / "out", broker_conf=broker_conf(tmp_path, folder),
                split_size=64 << 10)
    # the clean store's ConsumeQueues are RocketMQ's own: the rebuild over both directories writes the same bytes
    assert {d.status for d in r.differences if d.kind == "consumequeue"} == {"identical"}
    assert not [f for f in r.findings if "multipath" not in f and "lock" not in f]
