"""spark.read.format("rocketmq"): golden stores exactly, narrow schemas, pushdown, splits."""
from __future__ import annotations

import pytest

from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.datasource.commitlog import RocketMQPushdownDataSource
from rocketstore_spark.datasource.schemas import struct
from tests.builders import write_segments
from tests.codec.test_golden_decode import actual_row, expected_row
from tests.golden.goldens import BY_ID, GOLDEN_ROOT, GOLDENS
from tests.store_files import copy_store

pytestmark = pytest.mark.spark



@pytest.mark.parametrize("golden", GOLDENS, ids=[g.id for g in GOLDENS])
def test_golden_store_through_spark_is_exact(spark, golden):
    df = spark.read.format("rocketmq").load(str(golden.store))
    rows = [r.asDict(recursive=True) for r in df.orderBy("physical_offset").collect()]
    assert {r["store"] for r in rows} == {str(golden.store)}
    got = []
    for r in rows:
        r.pop("store")
        got.append(actual_row(r))
    want = [expected_row(m) for m in sorted(golden.records_on_disk, key=lambda m: m["physical_offset"])]
    assert got == want


def test_user_schema_decodes_only_those_columns(spark):
    g = BY_ID["5.5.1/clean"]
    df = spark.read.format("rocketmq").schema("topic STRING, body_length INT").load(str(g.store))
    assert df.columns == ["topic", "body_length"]
    got = sorted((r.topic, r.body_length) for r in df.collect())
    assert got == sorted((m["topic"], m["body_length"]) for m in g.messages)


def test_unknown_column_and_bad_option_fail_clearly(spark):
    g = BY_ID["4.9.8/clean"]
    with pytest.raises(Exception, match="unknown column 'nope'"):
        spark.read.format("rocketmq").schema("nope STRING").load(str(g.store)).collect()
    with pytest.raises(Exception, match="splitSize"):
        spark.read.format("rocketmq").option("splitSize", "abc").load(str(g.store)).collect()
    with pytest.raises(Exception, match="manifest.json is a file, not a store"):
        spark.read.format("rocketmq").load(str(g.path / "manifest.json")).collect()


FILTERS = [
    "topic = 'TopicTest'",
    "topic IN ('OrderTopic', 'V6Topic') AND queue_id = 1",
    "physical_offset >= 200000 AND physical_offset < 300000",
    "queue_offset > 5 AND transaction_type = 'COMMIT'",
    "store_timestamp >= (SELECT min(store_timestamp) FROM golden) + INTERVAL 5 SECONDS",
]


@pytest.mark.parametrize("condition", FILTERS)
def test_pushed_filters_give_the_same_rows_as_spark(spark, condition):
    g = BY_ID["5.5.1/clean"]
    df = spark.read.format("rocketmq").load(str(g.store))
    df.createOrReplaceTempView("golden")
    pushed = spark.sql(f"SELECT physical_offset FROM golden WHERE {condition}")
    # the same condition evaluated by Spark on a materialised copy (no pushdown possible)
    spark.createDataFrame(df.collect(), df.schema).createOrReplaceTempView("golden_copy")
    plain = spark.sql(f"SELECT physical_offset FROM golden_copy WHERE {condition.replace('FROM golden', 'FROM golden_copy')}")
    got = sorted(r[0] for r in pushed.collect())
    assert got == sorted(r[0] for r in plain.collect())
    assert got, "the filter should select something"


def test_physical_offset_filter_skips_whole_segments():
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThan
    g = BY_ID["4.9.8/clean"]
    reader = RocketMQPushdownDataSource({"path": str(g.store)}).reader(struct("physical_offset BIGINT"))

    def segments_read():
        return [r.base_offset for p in reader.partitions() for r in p.ranges]

    all_segments = segments_read()
    remaining = list(reader.pushFilters([GreaterThanOrEqual(("physical_offset",), 262144),
                                         LessThan(("physical_offset",), 300000)]))
    assert remaining == []
    assert segments_read() == [262144] and len(all_segments) == 4


def test_splits_inside_large_segments_read_every_record_once(spark, tmp_path):
    w = SegmentWriter(3 << 20)
    placed = [w.append(Message(topic=f"T{i % 5}", body=bytes(200 + i % 3000), properties={"TAGS": "x"}))
              for i in range(4000)]
    write_segments(w, tmp_path / "commitlog")
    df = spark.read.format("rocketmq").option("splitSize", str(1 << 20)).schema("physical_offset BIGINT") \
        .load(str(tmp_path))
    assert df.rdd.getNumPartitions() == 3 * len(w.segments)
    assert sorted(r[0] for r in df.collect()) == [p for p, _ in placed]


@pytest.mark.parametrize("split_size", [4096, 50_000, 131_072])
def test_partitions_cut_anywhere_and_packed_across_segments_read_every_record_once(spark, split_size):
    # golden segments are 128 KiB: these cuts fall inside records, on segment ends, and across segments
    g = BY_ID["5.5.1/clean"]
    df = spark.read.format("rocketmq").option("splitSize", str(split_size)) \
        .schema("physical_offset BIGINT, queue_offset BIGINT").load(str(g.store))
    total = sum(f.stat().st_size for f in (g.store / "commitlog").iterdir())
    assert df.rdd.getNumPartitions() == -(-total // split_size)
    assert sorted(tuple(r) for r in df.collect()) == sorted((m["physical_offset"], m["queue_offset"])
                                                            for m in g.messages)


def test_several_stores_by_glob(spark):
    pattern = str(GOLDEN_ROOT / "rocketmq-*" / "clean" / "store")
    df = spark.read.format("rocketmq").schema("store STRING").load(pattern)
    counts = {r["store"]: r["count"] for r in df.groupBy("store").count().collect()}
    assert counts == {str(g.store): len(g.messages) for g in BY_ID.values() if g.scenario == "clean"}
    assert len(counts) >= 2


def test_store_timestamp_literal_filter_is_exact_to_the_millisecond(spark):
    import datetime as dt
    g = BY_ID["5.5.1/clean"]
    stamps = sorted(m["store_timestamp"] for m in g.messages)
    t = stamps[len(stamps) // 2]
    literal = dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    df = spark.read.format("rocketmq").schema("store_timestamp TIMESTAMP").load(str(g.store))
    assert df.where(f"store_timestamp >= TIMESTAMP '{literal}'").count() == sum(s >= t for s in stamps)
    assert df.where(f"store_timestamp < TIMESTAMP '{literal}'").count() == sum(s < t for s in stamps)


def test_register_turns_on_what_the_sources_need(spark):
    from rocketstore_spark.datasource import register
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")      # a user's own, plain session
    register(spark)
    g = BY_ID["5.5.1/clean"]
    df = spark.read.format("rocketmq").load(str(g.store))
    # what RocketMQ wrote (the golden manifest): a filter and the columns that need the sources' settings
    assert df.where("queue_id = 0").count() == sum(m["queue_id"] == 0 for m in g.messages)
    got = {(r.physical_offset, r.topic, r.uniq_key, r.body_crc_ok) for r in
           df.select("physical_offset", "topic", "uniq_key", "body_crc_ok").collect()}
    assert got == {(m["physical_offset"], m["topic"], m["uniq_key"], m["body_crc_ok"]) for m in g.messages}


def test_a_bad_path_fails_when_the_dataframe_is_created_with_one_clear_line(spark, tmp_path):
    from pyspark.errors import PySparkException
    for source in ("rocketmq", "rocketmq_consumequeue"):
        with pytest.raises(PySparkException, match="/nope/store: no such file or directory"):
            spark.read.format(source).load("/nope/store")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(PySparkException, match="is a file, not a store"):
        spark.read.format("rocketmq").schema("topic STRING").load(str(tmp_path / "notes.txt")).collect()


def test_a_store_of_another_engine_is_refused_not_read_as_classic(spark, tmp_path):
    """A store whose ConsumeQueues live in RocksDB has no queue files to read: refused, not read as empty. A
    DLedger store is read through its entries: the rows are RocketMQ's records (tests/store/test_dledger.py
    holds the field-by-field comparison), at the physical offsets its getMessage reports."""
    import json
    import shutil

    from pyspark.errors import PySparkException
    dledger = GOLDEN_ROOT / "dledger-5.5.1" / "switched"
    manifest = json.loads((dledger / "manifest.json").read_text())
    rows = spark.read.format("rocketmq").schema("physical_offset BIGINT, topic STRING, queue_id INT, "
                                                "queue_offset BIGINT, msg_id STRING") \
        .option("splitSize", 40000).load(str(dledger / "store")).collect()
    ours = {r.physical_offset: (r.topic, r.queue_id, r.queue_offset, r.msg_id) for r in rows}
    served = {m["physical_offset"]: (m["topic"], m["queue_id"], m["queue_offset"], m["msg_id"])
              for m in manifest["messages"] if "physical_offset" in m}
    assert len(ours) == len(rows) and {o: ours[o] for o in served} == served
    assert sorted(o for o in ours if o >= 65536) == [e["pos"] + 48 for e in manifest["entries"]]
    store = copy_store(BY_ID["5.5.1/clean"].store, tmp_path / "store")
    shutil.rmtree(store / "consumequeue")
    shutil.copytree(store / "rocksdbstore", store / "consumequeue")       # a RocksDB database RocketMQ wrote
    # read as a RocksDB ConsumeQueue (tests/datasource/test_rocksdb_sources.py), which this one (5.5's message
    # store) is not: a one-line refusal naming it
    with pytest.raises(PySparkException, match="consumequeue: no 'offset' column family: not a RocketMQ ConsumeQueue"):
        spark.read.format("rocketmq_consumequeue").load(str(store)).collect()
    assert spark.read.format("rocketmq").load(str(store)).count() == len(BY_ID["5.5.1/clean"].messages)


def test_a_filtered_query_does_not_leak_into_later_queries_of_the_same_dataframe(spark):
    g = BY_ID["5.5.1/clean"]
    msgs = spark.read.format("rocketmq").load(str(g.store))
    topic_test = sum(m["topic"] == "TopicTest" for m in g.messages)
    assert msgs.where("topic = 'TopicTest'").count() == topic_test
    assert msgs.count() == len(g.messages)
    assert msgs.where("physical_offset < 1000").count() == sum(m["physical_offset"] < 1000 for m in g.messages)
    assert msgs.groupBy().count().collect()[0][0] == len(g.messages)


def test_start_offset_reads_exactly_the_records_from_it_on_and_plans_nothing_below():
    """``startOffset`` (an ingest's watermark: the end of a record) on any Spark: segments ending before it are
    not planned, the read starts at it, every later record once — also when it is a segment's BLANK."""
    from rocketstore_spark.datasource.commitlog import RocketMQDataSource
    g = BY_ID["4.9.8/clean"]
    messages = sorted(g.messages, key=lambda m: m["physical_offset"])
    ends = [m["physical_offset"] + m["total_size"] for m in messages]
    blank = max(e for e in ends if e < 262144)                   # the BLANK that closes segment 131072
    for start in (0, ends[0], ends[len(ends) // 2], blank, 262144, ends[-2], ends[-1]):
        reader = RocketMQDataSource({"path": str(g.store), "startOffset": str(start)}).reader(
            struct("physical_offset BIGINT"))
        parts = reader.partitions()
        assert all(r.base_offset + r.end > start and r.base_offset + r.start >= min(start, r.base_offset + r.end)
                   for p in parts for r in p.ranges)
        assert all(r.base_offset + r.start >= start for p in parts for r in p.ranges)
        got = [v for p in parts for b in reader.read(p) for v in b.column(0).to_pylist()]
        assert got == [m["physical_offset"] for m in messages if m["physical_offset"] >= start], start
