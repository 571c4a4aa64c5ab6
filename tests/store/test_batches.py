"""Arrow batch sizing of the rocketmq reader: small batches for wide rows, large ones for fixed-width rows."""
from __future__ import annotations

from pyspark.sql.pandas.types import to_arrow_schema

from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.datasource.batches import batch_limits, commitlog_batches
from rocketstore_spark.datasource.options import Options
from rocketstore_spark.datasource.planning import SegmentRange
from rocketstore_spark.datasource.schemas import struct


def _batches(tmp_path, ddl, **options):
    w = SegmentWriter(4 << 20)
    for i in range(9000):
        w.append(Message(topic="T", body=bytes(i % 50)))
    w.write(tmp_path / "commitlog")
    seg = tmp_path / "commitlog" / f"{0:020d}"
    rng = SegmentRange("s", str(seg), 0, 0, seg.stat().st_size)
    return list(commitlog_batches(rng, struct(ddl), [], Options({"path": str(tmp_path), **options})))


def test_fixed_width_rows_come_in_large_batches(tmp_path):
    sizes = [b.num_rows for b in _batches(tmp_path, "queue_offset BIGINT, store_timestamp TIMESTAMP")]
    assert sizes == [9000]


def test_rows_with_strings_come_in_4k_batches_and_batch_rows_overrides(tmp_path):
    assert [b.num_rows for b in _batches(tmp_path, "topic STRING, queue_offset BIGINT")] == [4096, 4096, 808]
    assert [b.num_rows for b in _batches(tmp_path, "queue_offset BIGINT", batchRows="5000")] == [5000, 4000]


def test_batch_limits():
    wide = to_arrow_schema(struct("body BINARY, queue_id INT"), timezone="UTC")
    narrow = to_arrow_schema(struct("body_crc_ok BOOLEAN, queue_id INT"), timezone="UTC")
    assert batch_limits(wide, None) == (4096, 16 << 20, 1)
    assert batch_limits(narrow, None)[0] == 65536 and batch_limits(narrow, None)[2] > 1
    assert batch_limits(narrow, 10)[0] == 10
