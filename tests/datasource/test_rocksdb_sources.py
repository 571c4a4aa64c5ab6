"""rocketmq_consumequeue and rocketmq_consumer_offsets on a RocksDB ConsumeQueue store (storeType=defaultRocksDB)
against RocketMQ 5.5.1's view in tests/golden/rocksdb-5.5.1/ (one local Spark session)."""
from __future__ import annotations

import pytest

from tests.store.test_rocksdb import SCENARIOS, manifest, snapshot, store, written_offsets

pytestmark = pytest.mark.spark


def test_rocksdb_queues_and_offsets_as_tables(spark):
    before = {s: snapshot(store(s)) for s in SCENARIOS}
    paths = ",".join(str(store(s)) for s in SCENARIOS)
    rows = spark.read.format("rocketmq_consumequeue").option("paths", paths).load().collect()
    for scenario in SCENARIOS:
        mine = [r for r in rows if r.store.endswith(f"/{scenario}/store")]
        got = sorted((r.topic, r.queue_id, r.queue_offset, r.physical_offset, r.size, r.tags_code) for r in mine)
        want = sorted((q["topic"], q["queue_id"], *u[:4]) for q in manifest(scenario)["stored"]["queues"]
                      for u in q["units"])
        assert got == want
        assert {(r.file, r.file_position, r.is_filler) for r in mine} == {
            (str(store(scenario) / "consumequeue"), None, False)}
    rows = spark.read.format("rocketmq_consumer_offsets").load(str(store("clean"))).collect()
    assert {(r.topic, r.consumer_group, r.queue_id): r.consumer_offset for r in rows} == written_offsets()
    assert {r.source_file.rsplit("/", 2)[-2:] == ["config", "consumerOffsets"] for r in rows} == {True}
    assert {s: snapshot(store(s)) for s in SCENARIOS} == before


def test_config_in_rocksdb_as_tables(spark, tmp_path):
    # the v1 RocksDB config (RocksDBConfigGolden: RocketMQ 5.5.1's v1 RocksDBConfigManager) and v2's config/rdb/
    # (RocksDBConfigV2Golden: its ConfigStorage) beside the store's v1 consumer offsets: rows equal to what
    # RocketMQ's managers load back
    from tests.golden.goldens import canonical
    from tests.store.test_rocksdb_config import config_manifest, expected, with_config
    for scenario, topics_db, groups_db in (("config-v1", "topics", "subscriptionGroups"), ("config-v2", "rdb", "rdb")):
        root = with_config(tmp_path / scenario, scenario)
        for table, source, db in (("topics", "rocketmq_topics", topics_db),
                                  ("subscription_groups", "rocketmq_subscription_groups", groups_db)):
            rows = [r.asDict() for r in spark.read.format(source).load(str(root)).collect()]
            assert {(r.pop("store"), r.pop("source_file")) for r in rows} == {(str(root), str(root / "config" / db))}
            assert canonical(rows) == expected(scenario, table), (scenario, table)
    rows = spark.read.format("rocketmq_consumer_offsets").load(str(root)).collect()
    assert sorted((r.consumer_group, r.topic, r.queue_id, r.consumer_offset) for r in rows) == \
        sorted(tuple(o) for o in config_manifest("config-v2")["consumer_offsets"])
    assert {r.source_file for r in rows} == {str(root / "config" / "rdb")}
