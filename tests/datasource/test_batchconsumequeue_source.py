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
