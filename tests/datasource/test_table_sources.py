"""rocketmq_segments, _consumequeue, _index, _index_header, _checkpoint, _consumer_offsets against
RocketMQ's manifests; Delta Lake round trip."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tests.codec.test_commitlog import millis
from tests.golden.goldens import BY_ID, fastjson_loads

pytestmark = pytest.mark.spark



def test_segments_show_damage_as_data(spark):
    g = BY_ID["4.9.8/corrupt-body"]
    rows = spark.read.format("rocketmq_segments").load(str(g.store)).orderBy("base_offset").collect()
    flipped = sorted(s["physical_offset"] for s in g.manifest["surgery"])
    assert sum(r.crc_failures for r in rows) == 2
    assert sorted(r.first_crc_failure for r in rows if r.first_crc_failure is not None) == flipped
    assert [r.records for r in rows] == [s["records"] for s in g.manifest["segments"]]

    t = BY_ID["5.5.1/torn-tail"]
    torn = t.manifest["surgery"][0]
    rows = spark.read.format("rocketmq_segments").load(str(t.store)).collect()
    bad = [r for r in rows if r.findings]
    assert len(bad) == 1 and bad[0].stop_position == torn["physical_offset"] - bad[0].base_offset
    assert bad[0].findings[0].check == "commitlog.length_mismatch"


def test_consumequeue_rows_point_at_the_records(spark):
    g = BY_ID["4.9.8/clean"]
    cq = spark.read.format("rocketmq_consumequeue").load(str(g.store))
    got = {(r.topic, r.queue_id, r.queue_offset): (r.physical_offset, r.size, r.tags_code) for r in cq.collect()}
    want = {(m["topic"], m["queue_id"], m["queue_offset"]): (m["physical_offset"], m["total_size"], m["tags_code"])
            for m in g.messages if m["transaction_type"] in (0, 8)}
    assert got == want


def test_index_entries_are_every_key_rocketmq_indexed(spark):
    g = BY_ID["5.5.1/clean"]
    idx = spark.read.format("rocketmq_index").load(str(g.store))          # geometry inferred from the files
    got = sorted((r.key_hash, r.physical_offset) for r in idx.collect())
    want = sorted((k["hash"], m["physical_offset"]) for m in g.messages for k in m["index_keys"])
    assert got == want
    headers = spark.read.format("rocketmq_index_header").load(str(g.store)).collect()
    assert sum(h.index_count - 1 for h in headers) == len(want)
    geometry = g.manifest["geometry"]
    assert {(h.hash_slot_num, h.index_num, h.geometry_source) for h in headers} == {
        (geometry["max_hash_slot_num"], geometry["max_index_num"], "file contents")}


def test_an_index_file_whose_geometry_cannot_be_established_fails_naming_it(spark):
    from pyspark.errors import PySparkException
    g = BY_ID["5.5.1/index-truncated"]
    with pytest.raises(PySparkException, match=r"index\.unknown_geometry: .*/index/\d{17}: .*hashSlotNum=8"):
        spark.read.format("rocketmq_index").option("hashSlotNum", "8").load(str(g.store)).collect()
    headers = spark.read.format("rocketmq_index_header").option("hashSlotNum", "8").load(str(g.store)).collect()
    assert all(h.hash_slot_num is None and "do not fit hashSlotNum=8" in h.geometry_problem for h in headers)
    # without the option, the file cut short takes the slot count of the store's other files
    rows = spark.read.format("rocketmq_index_header").load(str(g.store)).collect()
    assert sorted(h.geometry_source for h in rows).count("the store's other IndexFiles") == 1


def test_checkpoint_matches_storecheckpoint(spark):
    for gid in ("4.9.8/crash", "5.5.1/clean"):
        g = BY_ID[gid]
        r = spark.read.format("rocketmq_checkpoint").load(str(g.store)).collect()[0]
        cp = g.manifest["checkpoint"]
        assert millis(r.physic_msg_timestamp) == cp["physicMsgTimestamp"]
        assert millis(r.min_timestamp) == cp["minTimestamp"]
        assert millis(r.min_timestamp_index) == cp["minTimestampIndex"]
        assert r.abort_present == g.manifest["abort_present"]
        if "logicsPhysicalOffset" in cp:
            assert r.logics_physical_offset == cp["logicsPhysicalOffset"]


def test_consumer_offsets(spark):
    for v in ("4.9.8", "5.5.1"):
        g = BY_ID[f"{v}/consumer-offsets"]
        rows = spark.read.format("rocketmq_consumer_offsets").load(str(g.store)).collect()
        table = fastjson_loads((g.store / "config" / "consumerOffset.json").read_text())["offsetTable"]
        want = sorted((k.split("@")[0], k.split("@")[1], int(q), o) for k, qs in table.items() for q, o in qs.items())
        assert sorted((r.topic, r.consumer_group, r.queue_id, r.consumer_offset) for r in rows) == want


def test_delta_round_trip(spark, tmp_path):
    g = BY_ID["5.5.1/clean"]
    df = spark.read.format("rocketmq").load(str(g.store))
    target = str(tmp_path / "messages")
    df.write.format("delta").partitionBy("topic").save(target)
    back = spark.read.format("delta").load(target)
    assert back.count() == len(g.messages)
    digest = lambda d: d.select(F.sum(F.crc32(F.col("body"))).alias("s"), F.sum("physical_offset").alias("p")).first()
    assert digest(back) == digest(df)
    assert spark.sql(f"DESCRIBE HISTORY delta.`{target}`").count() == 1


def test_segments_share_partitions_one_per_core(spark):
    g = BY_ID["4.9.8/corrupt-body"]
    df = spark.read.format("rocketmq_segments").load(str(g.store))
    cores = spark.sparkContext.defaultParallelism
    assert df.rdd.getNumPartitions() == min(cores, len(g.manifest["segments"]))
    assert sorted(r.base_offset for r in df.collect()) == sorted(s["base_offset"] for s in g.manifest["segments"])


def test_segments_carry_layout_findings(spark, tmp_path):
    from rocketstore_spark.codec.encode import Message, SegmentWriter
    from tests.builders import write_segments
    w = SegmentWriter(16 * 1024)
    for i in range(100):
        w.append(Message(topic="T", body=bytes(300)))
    files = write_segments(w, tmp_path / "commitlog")
    files[1].write_bytes(files[1].read_bytes()[:5000])          # one segment of the wrong size
    rows = {r.segment: r for r in spark.read.format("rocketmq_segments").load(str(tmp_path)).collect()}
    assert [f.check for f in rows[files[1].name].findings][0] == "commitlog.wrong_size"
    assert all(not r.findings for name, r in rows.items() if name != files[1].name)


def test_every_source_reads_a_hostile_copy_of_a_store(spark, tmp_path):
    """Corrupt checkpoint times, an IndexFile header claiming 2^31 entries, a non-UTF-8 topic directory, a
    malformed consumerOffset.json, a segment copied under the next name: every source reads, none crashes."""
    import os
    import shutil
    import struct
    g = BY_ID["5.5.1/clean"]
    store = tmp_path / "store"
    shutil.copytree(g.store, store)
    cp = bytearray((store / "checkpoint").read_bytes())
    cp[0:16] = struct.pack(">qq", 1 << 62, -(1 << 62))
    (store / "checkpoint").write_bytes(bytes(cp))
    index = sorted((store / "index").iterdir())[0]
    raw = bytearray(index.read_bytes())
    raw[36:40] = struct.pack(">i", (1 << 31) - 1)
    index.write_bytes(bytes(raw))
    queue = next(p for p in (store / "consumequeue").glob("*/0"))
    shutil.copytree(queue, store / "consumequeue" / os.fsdecode(b"T\xff") / "0")
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "consumerOffset.json").write_text('{"offsetTable":{"T@g":{0:null}}}')
    (store / "config" / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@g":{0:3}}}')
    segments = sorted((store / "commitlog").iterdir())
    shutil.copy(segments[0], store / "commitlog" / f"{len(segments) * 131072:020d}")

    msgs = spark.read.format("rocketmq").schema("physical_offset BIGINT").load(str(store)).collect()
    assert sorted(r[0] for r in msgs) == sorted(m["physical_offset"] for m in g.messages)
    seg_rows = spark.read.format("rocketmq_segments").load(str(store)).collect()
    assert any(f.check == "commitlog.misplaced_records" for r in seg_rows for f in r.findings)
    cp_row = spark.read.format("rocketmq_checkpoint").load(str(store)).collect()[0]
    assert cp_row.physic_msg_timestamp is None and cp_row.logics_msg_timestamp is None
    topics = {r.topic for r in spark.read.format("rocketmq_consumequeue").load(str(store)).collect()}
    assert "T\ufffd" in topics
    idx = spark.read.format("rocketmq_index").option("hashSlotNum", "64").load(str(store))
    assert idx.where(F.col("file") == index.name).count() == 255          # what the 256-entry file holds
    offsets = spark.read.format("rocketmq_consumer_offsets").load(str(store)).collect()
    assert [(r.consumer_offset, r.source_file.rsplit("/", 1)[1]) for r in offsets] == [(3, "consumerOffset.json.bak")]


def test_a_commitlog_directory_given_to_a_store_table_says_why_it_cannot_be_read(spark):
    from pyspark.errors import PySparkException
    cl = BY_ID["5.5.1/clean"].store / "commitlog"
    for source in ("rocketmq_consumequeue", "rocketmq_checkpoint", "rocketmq_index", "rocketmq_consumer_offsets"):
        with pytest.raises(PySparkException, match=f"is a CommitLog directory: {source} reads the store root"):
            spark.read.format(source).load(str(cl)).collect()
    assert spark.read.format("rocketmq_segments").load(str(cl)).count() == 4


def test_store_findings_not_about_a_segment_come_in_a_row_of_their_own(spark, tmp_path):
    import shutil
    store = tmp_path / "store"
    shutil.copytree(BY_ID["5.5.1/clean"].store, store)
    (store / "commitlog" / "notes.txt").write_text("operator notes")
    (store / "commitlog" / "old").mkdir()
    rows = spark.read.format("rocketmq_segments").load(str(store)).collect()
    store_rows = [r for r in rows if r.segment is None]
    assert len(rows) == len(BY_ID["5.5.1/clean"].manifest["segments"]) + 1 and len(store_rows) == 1
    assert sorted((f.check, f.file) for f in store_rows[0].findings) == [
        ("store.stray_entry", "commitlog/old"), ("store.stray_file", "commitlog/notes.txt")]
    assert all(not r.findings for r in rows if r.segment is not None)
