"""The rocketmq source's executor side: Arrow batches with exactly the schema's columns, sized by row width."""
from __future__ import annotations

from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.datasource.commitlog import commitlog_batches
from rocketstore_spark.datasource.options import CommitLogOptions
from rocketstore_spark.datasource.planning import SegmentRange
from rocketstore_spark.datasource.schemas import struct
from tests.builders import write_segments


def _batches(tmp_path, ddl, **options):
    w = SegmentWriter(4 << 20)
    for i in range(9000):
        w.append(Message(topic="T", body=bytes(i % 50)))
    write_segments(w, tmp_path / "commitlog")
    seg = tmp_path / "commitlog" / f"{0:020d}"
    rng = SegmentRange("s", str(seg), 0, 0, seg.stat().st_size)
    return list(commitlog_batches(rng, struct(ddl), [], CommitLogOptions({"path": str(tmp_path), **options})))


def test_fixed_width_rows_come_in_large_batches(tmp_path):
    sizes = [b.num_rows for b in _batches(tmp_path, "queue_offset BIGINT, store_timestamp TIMESTAMP")]
    assert sizes == [9000]


def test_rows_with_strings_come_in_4k_batches_and_batch_rows_overrides(tmp_path):
    assert [b.num_rows for b in _batches(tmp_path, "topic STRING, queue_offset BIGINT")] == [4096, 4096, 808]
    assert [b.num_rows for b in _batches(tmp_path, "queue_offset BIGINT", batchRows="5000")] == [5000, 4000]


def test_batches_hold_exactly_the_schema_columns_in_its_order(tmp_path):
    batches = _batches(tmp_path, "store STRING, queue_offset BIGINT, topic STRING")
    assert batches[0].schema.names == ["store", "queue_offset", "topic"]
    assert batches[0].column("store").to_pylist()[:2] == ["s", "s"]


def test_a_segment_this_executor_cannot_open_fails_the_task_naming_it(tmp_path):
    import pytest
    from rocketstore_spark.findings import StoreError
    rng = SegmentRange("s", str(tmp_path / "commitlog" / f"{0:020d}"), 0, 0, 4096)
    with pytest.raises(StoreError, match="commitlog.unreadable.*00000000000000000000"):
        list(commitlog_batches(rng, struct("topic STRING"), [], CommitLogOptions({"path": str(tmp_path)})))
