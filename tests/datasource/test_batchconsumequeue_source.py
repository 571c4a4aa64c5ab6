"""rocketmq_batchconsumequeue against RocketMQ 5.5.1's view in tests/golden/batchcq-5.5.1/ (one local Spark
session)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.test_batchconsumequeue import SCENARIOS, batch_queues, manifest, store

pytestmark = pytest.mark.spark


def test_batch_consume_queue_as_a_table(spark):
    paths = ",".join(str(store(s)) for s in SCENARIOS)
    rows = spark.read.format("rocketmq_batchconsumequeue").option("paths", paths).load().collect()
    for scenario in SCENARIOS:
        mine = [r for r in rows if r.store.endswith(f"/{scenario}/store")]
        got = sorted((r.topic, r.queue_id, r.base_offset, r.physical_offset, r.size, r.tags_code, r.batch_size,
                      r.compacted_offset) for r in mine)
        want = sorted((q["topic"], q["queue_id"], *u) for q in batch_queues(scenario) for u in q["units"])
        assert got == want
        raw = {(f["path"], i * 46): unit for f in manifest(scenario)["files"] for i, unit in enumerate(f["units"])}
        assert len(raw) == len(mine)
        for r in mine:
            unit = bytes.fromhex(raw[(str(Path(r.file).relative_to(store(scenario))), r.file_position)])
            assert int.from_bytes(unit[20:28], "big") == r.store_timestamp_ms == int(r.store_time.timestamp() * 1000)
            assert r.reserved == int.from_bytes(unit[42:46], "big")
            assert r.unit_index == (int(r.file.rsplit("/", 1)[1]) + r.file_position) // 46


def test_rocketmq_source_unwraps_inner_batches_on_request(spark):
    import hashlib
    clean = str(store("clean"))
    narrow = "topic STRING, queue_id INT, queue_offset BIGINT, physical_offset BIGINT, tags STRING, body BINARY"
    rows = (spark.read.format("rocketmq").schema(narrow).option("unwrapBatches", "true").load(clean)
            .where("topic = 'BatchTopic'").collect())
    got = sorted((r.queue_id, r.queue_offset, r.physical_offset, r.tags, hashlib.sha256(r.body).hexdigest())
                 for r in rows)
    want = sorted((q["queue_id"], m["queue_offset"], m["commitlog_offset"], m["tags"], m["body_sha256"])
                  for q in batch_queues("clean") for m in q["received"])
    assert got == want
    # the default stays one row per record: RocketMQ's units
    outer = spark.read.format("rocketmq").schema(narrow).load(clean).where("topic = 'BatchTopic'").count()
    assert outer == sum(len(q["units"]) for q in batch_queues("clean"))
