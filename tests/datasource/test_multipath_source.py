"""Spark over a multi-path CommitLog: the ``rocketmq`` source given option ``storePathCommitLog`` reads RocketMQ's
golden store written over two directories (tests/golden/multipath-5.5.1) as RocketMQ reads it, one log, physical
offsets as RocketMQ reports them; the Spark verify job given broker.conf (its ``rocketmq_segments`` and ``rocketmq``
reads with the option) finds what the in-process verify finds. The rebuild, the recovery report and the store
given without its second directory: tests/store/test_multipath.py."""
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


@pytest.mark.long          # 26-33 s on a 2-core machine under load (several Spark stages for one small store)
def test_the_spark_verify_job_given_broker_conf_equals_the_in_process_verify(spark, tmp_path):
    from rocketstore_spark.spark.verify import verify
    from rocketstore_spark.verify.store import verify_store
    folder = ROOT / "crash"
    conf = broker_conf(tmp_path, folder)
    rep = verify(spark, str(folder / "store"), broker_conf=conf).stores[0]
    ref = verify_store(str(folder / "store"), broker_conf=conf)
    assert sorted(f.to_json() for f in rep.findings) == sorted(f.to_json() for f in ref.findings)
    assert [(q["topic"], q["queue_id"], q["min_offset"], q["max_offset"]) for q in rep.queues] == \
        [(q.topic, q.queue_id, q.min_offset, q.max_offset) for q in ref.queues]
    assert rep.records == len(manifest("crash")["messages"])
    assert {f.check for f in rep.findings if f.severity != "info"} == {"store.abort_present"}
